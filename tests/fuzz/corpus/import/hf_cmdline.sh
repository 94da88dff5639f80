# launched as in the Trainer examples
torchrun --nproc_per_node 4 --nnodes 1 train.py \
  --model_name_or_path Qwen/Qwen2-VL-2B-Instruct \
  --fsdp "full_shard auto_wrap offload" \
  --learning_rate 2e-5 --lr_scheduler_type constant_with_warmup --warmup_steps 20 \
  --per_device_train_batch_size 2 --gradient_accumulation_steps 4 \
  --max_steps 300 --bf16 --seed 11 \
  --eval_strategy no --save_strategy no
