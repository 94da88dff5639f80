# ui/samples: the Samples view, the probes' answers per evaluation or per trial (a filmstrip), and
# the word-level diff behind its highlights.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/samplespanel.cpp ${CMAKE_CURRENT_LIST_DIR}/samplespanel.h
  ${CMAKE_CURRENT_LIST_DIR}/samplesmodel.cpp ${CMAKE_CURRENT_LIST_DIR}/samplesmodel.h
  ${CMAKE_CURRENT_LIST_DIR}/samplesdelegate.cpp ${CMAKE_CURRENT_LIST_DIR}/samplesdelegate.h
  ${CMAKE_CURRENT_LIST_DIR}/worddiff.cpp ${CMAKE_CURRENT_LIST_DIR}/worddiff.h)
