# The verbs beside train (issue #4): forward, tokenize, and the SFT batches train shares.
target_sources(shardscope_trainer PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/forward.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sft_batch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/make_demo_data.cpp
  # Forward+backward timing without an optimizer (the #4 benchmark).
  ${CMAKE_CURRENT_LIST_DIR}/bench_step.cpp
  # Generation and exact-match evaluation (the run folder's list is trainer/CMakeLists.txt).
  ${CMAKE_CURRENT_LIST_DIR}/../run/generate.cpp)
