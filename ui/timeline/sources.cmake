# ui/timeline: a run's steps per rank; UnitView, one step's per-unit streams per rank.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/unitview.cpp ${CMAKE_CURRENT_LIST_DIR}/unitview.h)
