# ui/compare: sweeps and trials side by side.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/comparepanel.cpp ${CMAKE_CURRENT_LIST_DIR}/comparepanel.h
  ${CMAKE_CURRENT_LIST_DIR}/parallellabels.cpp ${CMAKE_CURRENT_LIST_DIR}/parallellabels.h
  ${CMAKE_CURRENT_LIST_DIR}/compareplots.cpp ${CMAKE_CURRENT_LIST_DIR}/compareplots.h
  ${CMAKE_CURRENT_LIST_DIR}/pbtviews.cpp ${CMAKE_CURRENT_LIST_DIR}/pbtviews.h
  ${CMAKE_CURRENT_LIST_DIR}/studyplots.cpp ${CMAKE_CURRENT_LIST_DIR}/studyplots.h
  ${CMAKE_CURRENT_LIST_DIR}/studyviews.cpp ${CMAKE_CURRENT_LIST_DIR}/studyviews.h
  ${CMAKE_CURRENT_LIST_DIR}/trialcolours.cpp ${CMAKE_CURRENT_LIST_DIR}/trialcolours.h
  ${CMAKE_CURRENT_LIST_DIR}/triallines.cpp ${CMAKE_CURRENT_LIST_DIR}/triallines.h
  ${CMAKE_CURRENT_LIST_DIR}/trialoverlay.cpp ${CMAKE_CURRENT_LIST_DIR}/trialoverlay.h
  ${CMAKE_CURRENT_LIST_DIR}/triallistmodel.cpp ${CMAKE_CURRENT_LIST_DIR}/triallistmodel.h)
