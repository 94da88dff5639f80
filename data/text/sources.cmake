# Tokenizer, chat template and SFT samples.
target_sources(shardscope_data PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/chat.cpp
  ${CMAKE_CURRENT_LIST_DIR}/packing.cpp
  ${CMAKE_CURRENT_LIST_DIR}/probes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sft.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sft_prepare.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_load.cpp)
target_link_libraries(shardscope_data PRIVATE PkgConfig::PCRE2 PkgConfig::UTF8PROC)
