# ui/hosts: SSH hosts, their keys, GPUs and Slurm partitions.
target_sources(shardscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/hostspanel.cpp ${CMAKE_CURRENT_LIST_DIR}/hostspanel.h
  ${CMAKE_CURRENT_LIST_DIR}/hostdialogs.cpp ${CMAKE_CURRENT_LIST_DIR}/hostdialogs.h
  ${CMAKE_CURRENT_LIST_DIR}/hostworker.cpp ${CMAKE_CURRENT_LIST_DIR}/hostworker.h)
