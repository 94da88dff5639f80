# ui/runs: the run table panel.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/runtablemodel.cpp ${CMAKE_CURRENT_LIST_DIR}/runtablemodel.h
  ${CMAKE_CURRENT_LIST_DIR}/runspanel.cpp ${CMAKE_CURRENT_LIST_DIR}/runspanel.h
  ${CMAKE_CURRENT_LIST_DIR}/runspanel_files.cpp ${CMAKE_CURRENT_LIST_DIR}/runspanel_groups.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rungroupmodel.cpp ${CMAKE_CURRENT_LIST_DIR}/rungroupmodel.h
  ${CMAKE_CURRENT_LIST_DIR}/groupdialog.cpp ${CMAKE_CURRENT_LIST_DIR}/groupdialog.h
  ${CMAKE_CURRENT_LIST_DIR}/checkpointsdialog.cpp ${CMAKE_CURRENT_LIST_DIR}/checkpointsdialog.h
  ${CMAKE_CURRENT_LIST_DIR}/tagdialogs.cpp ${CMAKE_CURRENT_LIST_DIR}/tagdialogs.h
  ${CMAKE_CURRENT_LIST_DIR}/tagsdelegate.cpp ${CMAKE_CURRENT_LIST_DIR}/tagsdelegate.h)
