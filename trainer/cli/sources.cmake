# The verbs beside train (issue #4): forward, tokenize, and the SFT batches train shares.
target_sources(shardscope_trainer PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/forward.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sft_batch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenize.cpp)
