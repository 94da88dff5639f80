# ui/timeline: the selected run's phases per rank over its steps, and the straggler verdict.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/timelinepanel.cpp ${CMAKE_CURRENT_LIST_DIR}/timelinepanel.h
  ${CMAKE_CURRENT_LIST_DIR}/timelineview.cpp ${CMAKE_CURRENT_LIST_DIR}/timelineview.h)
