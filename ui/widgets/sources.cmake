# ui/widgets: widgets that more than one panel shows.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/candidatetable.cpp ${CMAKE_CURRENT_LIST_DIR}/candidatetable.h
  ${CMAKE_CURRENT_LIST_DIR}/curvegraph.cpp ${CMAKE_CURRENT_LIST_DIR}/curvegraph.h
  ${CMAKE_CURRENT_LIST_DIR}/curveplot.cpp ${CMAKE_CURRENT_LIST_DIR}/curveplot.h
  ${CMAKE_CURRENT_LIST_DIR}/densitylines.cpp ${CMAKE_CURRENT_LIST_DIR}/densitylines.h
  ${CMAKE_CURRENT_LIST_DIR}/linebounds.h
  ${CMAKE_CURRENT_LIST_DIR}/plotexport.cpp ${CMAKE_CURRENT_LIST_DIR}/plotexport.h
  ${CMAKE_CURRENT_LIST_DIR}/smoothing.cpp ${CMAKE_CURRENT_LIST_DIR}/smoothing.h)
