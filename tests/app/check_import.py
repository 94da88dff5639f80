#!/usr/bin/env python3
"""shardscope-cli import on files written by the tools themselves, through their own APIs:

  - accelerate: ClusterConfig(...).to_yaml_file for an FSDP version-1 config (the strategy in
    fsdp_reshard_after_forward, as `accelerate config` writes it) and a version-2 one (a
    boolean), and to_json_file for a multi-GPU (DDP) one;
  - transformers: TrainingArguments(..., fsdp="full_shard auto_wrap", fsdp_config=...)
    .to_json_string(), the JSON the Trainer saves, with warmup as a ratio; and a torchrun
    command line whose expected values are what HfArgumentParser parses from the same words.

Each file is imported with --json; the report must have one entry per key of the file (a table
reported whole, or each of its keys) and no error, and the written experiment (read with
tomllib) must hold the mapped values. Usage: check_import.py CLI
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import tomllib
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from accelerate.commands.config.config_args import ClusterConfig  # noqa: E402
import transformers  # noqa: E402
import yaml  # noqa: E402


def leaf_keys(table, prefix=""):
    out = set()
    for key, value in table.items():
        if isinstance(value, dict) and value:
            out |= leaf_keys(value, prefix + key + ".")
        else:
            out.add(prefix + key)
    return out


def check_coverage(name, file_keys, report):
    entries = [e["key"] for e in report["entries"]]
    assert len(entries) == len(set(entries)), f"{name}: a key reported twice: {entries}"
    for key in sorted(file_keys):
        covering = [e for e in entries if e == key or key.startswith(e + ".")]
        assert len(covering) == 1, f"{name}: key {key} is reported {len(covering)} times"
    for e in entries:
        assert any(k == e or k.startswith(e + ".") for k in file_keys), \
            f"{name}: the report names {e}, which is not in the file"


def run_import(cli, kind, path, out):
    proc = subprocess.run([cli, "--json", "import", kind, path, "-o", out],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{path}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    report = json.loads(proc.stdout)
    assert report["ok"] and report["errors"] == 0, report
    assert report["written"] == os.path.abspath(out), report
    with open(out, "rb") as f:
        return report, tomllib.load(f)


def expect(name, toml, expected):
    for dotted, want in expected.items():
        section, key = dotted.split(".")
        got = toml[section][key]
        ok = abs(got - want) <= 1e-12 * abs(want) if isinstance(want, float) else got == want
        assert ok, f"{name}: {dotted} = {got!r}, expected {want!r}"


def accelerate_fsdp1(work):
    cfg = ClusterConfig(
        compute_environment="LOCAL_MACHINE", distributed_type="FSDP", mixed_precision="bf16",
        use_cpu=False, debug=False, num_processes=8, num_machines=1, machine_rank=0,
        main_training_function="main", rdzv_backend="static", same_network=True,
        enable_cpu_affinity=False,
        fsdp_config={
            "fsdp_version": 1, "fsdp_reshard_after_forward": "SHARD_GRAD_OP",
            "fsdp_offload_params": True, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_transformer_layer_cls_to_wrap": "Qwen2DecoderLayer",
            "fsdp_backward_prefetch": "BACKWARD_PRE", "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_forward_prefetch": True, "fsdp_use_orig_params": True,
            "fsdp_cpu_ram_efficient_loading": True, "fsdp_sync_module_states": True,
            "fsdp_activation_checkpointing": True,
        })
    path = os.path.join(work, "fsdp1.yaml")
    cfg.to_yaml_file(path)
    return path, {"shard.strategy": "SHARD_GRAD_OP", "shard.offload_params": True,
                  "shard.offload_optimizer": True, "shard.wrap_policy": "block",
                  "shard.backward_prefetch": "pre", "shard.forward_prefetch": True,
                  "shard.activation_checkpointing": True, "shard.precision": "bf16",
                  "launch.nproc_per_node": 8, "launch.nnodes": 1}


def accelerate_fsdp2(work):
    cfg = ClusterConfig(
        compute_environment="LOCAL_MACHINE", distributed_type="FSDP", mixed_precision="fp16",
        use_cpu=False, debug=False, num_processes=16, num_machines=2, machine_rank=0,
        main_process_ip="10.1.2.3", main_process_port=29500,
        fsdp_config={
            "fsdp_version": 2, "fsdp_reshard_after_forward": True, "fsdp_offload_params": False,
            "fsdp_auto_wrap_policy": "SIZE_BASED_WRAP", "fsdp_min_num_params": 20000000,
            "fsdp_state_dict_type": "FULL_STATE_DICT", "fsdp_cpu_ram_efficient_loading": False,
            "fsdp_activation_checkpointing": False,
        })
    path = os.path.join(work, "fsdp2.yaml")
    cfg.to_yaml_file(path)
    return path, {"shard.strategy": "FULL_SHARD", "shard.offload_params": False,
                  "shard.wrap_policy": "size", "shard.wrap_min_params": 20000000,
                  "shard.precision": "custom", "shard.param_dtype": "fp16",
                  "launch.nproc_per_node": 8, "launch.nnodes": 2, "launch.kind": "ssh",
                  "launch.hosts": ["10.1.2.3"]}


def accelerate_ddp_json(work):
    cfg = ClusterConfig(compute_environment="LOCAL_MACHINE", distributed_type="MULTI_GPU",
                        mixed_precision="bf16", use_cpu=False, debug=False, num_processes=2,
                        gpu_ids="0,1")
    path = os.path.join(work, "ddp.json")
    cfg.to_json_file(path)
    return path, {"shard.strategy": "NO_SHARD", "shard.precision": "bf16_autocast",
                  "launch.gpus": [0, 1], "launch.nproc_per_node": 2}


def trainer_args(work):
    args = transformers.TrainingArguments(
        output_dir=os.path.join(work, "out"), fsdp="full_shard auto_wrap",
        fsdp_config={"transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"],
                     "activation_checkpointing": True, "cpu_offload": True},
        learning_rate=2e-5, lr_scheduler_type="cosine", warmup_steps=0.1, max_steps=400,
        per_device_train_batch_size=4, gradient_accumulation_steps=2, bf16=True, use_cpu=True,
        seed=123, eval_strategy="steps", eval_steps=40, save_strategy="steps", save_steps=100,
        save_total_limit=2, logging_steps=5, weight_decay=0.05, max_grad_norm=0.3,
        report_to="none")
    path = os.path.join(work, "training_args.json")
    with open(path, "w") as f:
        f.write(args.to_json_string())
    return path, {"train.lr": 2e-5, "train.lr_schedule": "cosine", "train.lr_warmup_steps": 40,
                  "train.max_steps": 400, "train.micro_batch_size": 4,
                  "train.batch_size": 4 * 2 * 2, "train.seed": 123, "train.ckpt_every": 100,
                  "train.ckpt_keep": 2, "train.log_every": 5, "train.weight_decay": 0.05,
                  "train.grad_clip": 0.3, "eval.every": 40, "shard.strategy": "FULL_SHARD",
                  "shard.precision": "bf16", "shard.activation_checkpointing": True,
                  "shard.offload_params": True, "shard.offload_optimizer": True,
                  "shard.device": "cpu"}


def trainer_command_line(work):
    """A launch line as a script's README shows it. HfArgumentParser parses the same words, so
    the expected values are what the Trainer itself would run with, not what this test thinks."""
    words = ("--output_dir out --fsdp 'full_shard auto_wrap offload' --learning_rate 3e-5 "
             "--lr_scheduler_type cosine --warmup_steps 30 --per_device_train_batch_size 2 "
             "--gradient_accumulation_steps 4 --max_steps 300 --bf16 --use_cpu --seed 9 "
             "--eval_strategy steps --eval_steps 25 --save_strategy no --logging_steps 5 "
             "--report_to none")
    (args,) = transformers.HfArgumentParser(transformers.TrainingArguments) \
        .parse_args_into_dataclasses(args=shlex.split(words))
    path = os.path.join(work, "launch.sh")
    with open(path, "w") as f:
        f.write("torchrun --nproc_per_node 4 train.py \\\n  " + words + "\n")
    strategy = "FULL_SHARD" if args.fsdp_config["reshard_after_forward"] else "SHARD_GRAD_OP"
    return path, {"train.lr": args.learning_rate, "train.lr_schedule": "cosine",
                  "train.lr_warmup_steps": args.get_warmup_steps(args.max_steps),
                  "train.max_steps": args.max_steps,
                  "train.micro_batch_size": args.per_device_train_batch_size,
                  "train.batch_size": args.per_device_train_batch_size
                  * args.gradient_accumulation_steps * 4,
                  "train.seed": args.seed, "eval.every": args.eval_steps,
                  "train.ckpt_every": 0, "train.ckpt_at_end": False,
                  "train.log_every": args.logging_steps, "shard.strategy": strategy,
                  "shard.offload_params": args.fsdp_config["cpu_offload"],
                  "shard.precision": "bf16" if args.bf16 else "fp32",
                  "shard.device": "cpu" if args.use_cpu else "auto",
                  "launch.nproc_per_node": 4}


def command_line_keys(path):
    words = shlex.split(open(path).read())
    script = words.index("train.py")
    launcher = {"launcher --" + w[2:] for w in words[:script] if w.startswith("--")}
    return launcher | {"--" + w[2:] for w in words[script + 1:] if w.startswith("--")}


def load(path):
    with open(path) as f:
        return yaml.safe_load(f) if path.endswith(".yaml") else json.load(f)


def main():
    cli = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        cases = [("accelerate", accelerate_fsdp1), ("accelerate", accelerate_fsdp2),
                 ("accelerate", accelerate_ddp_json), ("hf-trainer", trainer_args)]
        cases.append(("hf-trainer", trainer_command_line))
        for kind, make in cases:
            path, expected = make(work)
            report, toml = run_import(cli, kind, path, path + ".toml")
            keys = command_line_keys(path) if path.endswith(".sh") else leaf_keys(load(path))
            check_coverage(path, keys, report)
            expect(path, toml, expected)
            print(f"{os.path.basename(path)}: {len(report['entries'])} keys, "
                  f"{report['mapped']} mapped, {report['ignored']} ignored, "
                  f"{report['unsupported']} unsupported")
    print("import reference: ok")


if __name__ == "__main__":
    main()
