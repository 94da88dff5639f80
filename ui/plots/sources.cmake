# ui/plots: the live curves and logs of one run.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/plotspanel.cpp ${CMAKE_CURRENT_LIST_DIR}/plotspanel.h
  ${CMAKE_CURRENT_LIST_DIR}/plotaxes.cpp ${CMAKE_CURRENT_LIST_DIR}/plotaxes.h
  ${CMAKE_CURRENT_LIST_DIR}/plotcontrols.cpp ${CMAKE_CURRENT_LIST_DIR}/plotcontrols.h
  ${CMAKE_CURRENT_LIST_DIR}/logview.cpp ${CMAKE_CURRENT_LIST_DIR}/logview.h)
