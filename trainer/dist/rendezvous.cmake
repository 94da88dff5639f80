# trainer/dist's rendezvous environment on its own (torchrun's and Slurm's variables, the port that
# rank 0 publishes) and the communication settings a rank derives from it: torch-free, so it is
# built with or without LibTorch. The process group links it, and so does the fake trainer of the
# launcher tests, which meets its peers the same way.
add_library(shardscope_rendezvous STATIC ${CMAKE_CURRENT_LIST_DIR}/rendezvous.cpp
                                         ${CMAKE_CURRENT_LIST_DIR}/comm_env.cpp)
shardscope_layer(shardscope_rendezvous VIEW trainer/dist/rendezvous.h trainer/dist/comm_env.h)
target_link_libraries(shardscope_rendezvous PUBLIC shardscope_spec)
