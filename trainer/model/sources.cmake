# The models (issue #4): Qwen2 and Qwen2-VL over the Model interface of model.h, and LoRA.
target_sources(shardscope_trainer PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/dense.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lora.cpp
  ${CMAKE_CURRENT_LIST_DIR}/text_layers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/qwen2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/qwen2vl.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hf_weights.cpp
  # LoRA export lives with the checkpoints; listed here so the models own their LoRA sources.
  ${CMAKE_CURRENT_LIST_DIR}/../ckpt/peft.cpp)
