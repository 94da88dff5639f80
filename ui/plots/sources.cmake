# ui/plots: the live curves and logs of one run.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/plotspanel.cpp ${CMAKE_CURRENT_LIST_DIR}/plotspanel.h
  ${CMAKE_CURRENT_LIST_DIR}/logview.cpp ${CMAKE_CURRENT_LIST_DIR}/logview.h)
