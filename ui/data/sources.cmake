# ui/data: the run-log worker thread (every read of the run log) and the types it hands out.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/runlogtypes.h
  ${CMAKE_CURRENT_LIST_DIR}/runlog.cpp ${CMAKE_CURRENT_LIST_DIR}/runlog.h
  ${CMAKE_CURRENT_LIST_DIR}/runlogsignals.cpp ${CMAKE_CURRENT_LIST_DIR}/runlogsignals.h
  ${CMAKE_CURRENT_LIST_DIR}/runlogworker.cpp ${CMAKE_CURRENT_LIST_DIR}/runlogworker.h
  ${CMAKE_CURRENT_LIST_DIR}/runfiles.cpp ${CMAKE_CURRENT_LIST_DIR}/runfiles.h
  ${CMAKE_CURRENT_LIST_DIR}/runfilesworker.h
  ${CMAKE_CURRENT_LIST_DIR}/runlogphases.cpp ${CMAKE_CURRENT_LIST_DIR}/phasesdata.h
  ${CMAKE_CURRENT_LIST_DIR}/runlogsamples.cpp ${CMAKE_CURRENT_LIST_DIR}/samplesdata.h
  ${CMAKE_CURRENT_LIST_DIR}/sweepsource.cpp ${CMAKE_CURRENT_LIST_DIR}/sweepsource.h
  ${CMAKE_CURRENT_LIST_DIR}/verdictstext.cpp ${CMAKE_CURRENT_LIST_DIR}/verdictstext.h)
