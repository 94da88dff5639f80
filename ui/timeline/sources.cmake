# ui/timeline: the selected run's phases per rank over its steps, the straggler verdict, and
# UnitView, one step's per-unit streams per rank; RangeView, the zoom and pan both views share.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/rangeview.cpp ${CMAKE_CURRENT_LIST_DIR}/rangeview.h
  ${CMAKE_CURRENT_LIST_DIR}/timelinepanel.cpp ${CMAKE_CURRENT_LIST_DIR}/timelinepanel.h
  ${CMAKE_CURRENT_LIST_DIR}/timelineview.cpp ${CMAKE_CURRENT_LIST_DIR}/timelineview.h
  ${CMAKE_CURRENT_LIST_DIR}/unitview.cpp ${CMAKE_CURRENT_LIST_DIR}/unitview.h)
