// shardtrain: the trainer executable. One process per rank; see docs/ARCHITECTURE.md for the
// contract (verbs, rendezvous environment, events on stdout, logs on stderr). main() only wires.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "trainer/cli/bench_step.h"
#include "trainer/cli/estimate.h"
#include "trainer/cli/forward.h"
#include "trainer/cli/make_demo_data.h"
#include "trainer/cli/selftest.h"
#include "trainer/cli/tokenize.h"
#include "trainer/run/fatal.h"
#include "trainer/run/train.h"
#include "trainer/spec/version.h"

int main(int argc, char** argv) {
  using namespace shardscope::trainer;
  CLI::App app{"shardtrain: the Shardscope trainer (FSDP semantics on LibTorch c10d)",
               "shardtrain"};
  app.set_version_flag("--version", std::string("shardtrain ") + shardscope::kVersion);
  app.require_subcommand(1);

  SelftestOptions selftest;
  auto* cmd = app.add_subcommand("selftest", "Start local ranks and check the collectives (Gloo)");
  cmd->add_option("--world-size", selftest.world_size, "Ranks to start when no rendezvous is set")
      ->capture_default_str();
  cmd->add_option("--timeout-s", selftest.timeout_s, "Rendezvous and collective timeout, seconds")
      ->capture_default_str();
  cmd->add_option("--fault-rank", selftest.fault_rank,
                  "This rank misbehaves, to check failure detection");
  cmd->add_option("--fault-mode", selftest.fault_mode,
                  "exit: leave before the collectives; hang: never answer")
      ->check(CLI::IsMember({"exit", "hang"}));

  TrainOptions train;
  auto* train_cmd = app.add_subcommand("train", "Train one rank (torchrun/Slurm environment)");
  train_cmd->add_option("config", train.config, "Experiment TOML (trial.toml)")->required();
  train_cmd->add_option("--resume", train.resume,
                        "auto: the newest complete checkpoint of the run, or a checkpoint folder");
  train_cmd->add_option("--trace", train.trace,
                        "Write every collective's issue/wait and state placement to FILE "
                        "(FILE.rank-N on other ranks)");
  train_cmd->add_option("--set", train.overrides, "Override a field: --set train.lr=1e-3");
  train_cmd->add_option("--run-dir", train.run_dir, "Run directory (checkpoints go to ckpt/)")
      ->capture_default_str();
  train_cmd->add_option("--dump-params", train.dump_params,
                        "Write the final full parameters to FILE (safetensors), for tests");
  train_cmd->add_flag("--reference", train.reference,
                      "Unsharded plain-autograd reference (one process), for parity tests");
  train_cmd->add_option("--export", train.export_dir,
                        "After the last step, write the model as a Hugging Face folder to DIR "
                        "(with LoRA: merged weights, and the PEFT adapter in DIR/adapter)");

  TrainOptions exporting;
  auto* export_cmd = app.add_subcommand(
      "export", "Write a checkpoint as a Hugging Face folder (one process, any world size saved)");
  export_cmd->add_option("config", exporting.config, "Experiment TOML of the run")->required();
  export_cmd->add_option("--checkpoint", exporting.resume, "Checkpoint folder, or auto: the newest")
      ->required();
  export_cmd->add_option("--out", exporting.export_dir, "Output folder")->required();
  export_cmd->add_option("--run-dir", exporting.run_dir, "Run directory (for --checkpoint auto)")
      ->capture_default_str();
  export_cmd->add_option("--set", exporting.overrides, "Override a field: --set lora.r=16");

  TrainOptions gen;
  auto* gen_cmd = app.add_subcommand(
      "generate", "Generate the answers of data.eval_path under sharding (launched like train)");
  gen_cmd->add_option("config", gen.config, "Experiment TOML")->required();
  gen_cmd
      ->add_option("--out", gen.generate_out,
                   "Answers as JSON lines to FILE (FILE.rank-N on other ranks)")
      ->required();
  gen_cmd->add_option("--checkpoint", gen.resume, "Checkpoint folder, or auto: the newest");
  gen_cmd->add_option("--run-dir", gen.run_dir, "Run directory (for --checkpoint auto)")
      ->capture_default_str();
  gen_cmd->add_option("--set", gen.overrides, "Override a field: --set eval.max_new_tokens=8");
  gen_cmd->add_flag("--no-cache", gen.no_cache,
                    "Recompute the whole sequence every step instead of the key/value cache");
  gen_cmd->add_flag("--reference", gen.reference, "Unsharded plain-autograd model (one process)");

  MakeDemoDataOptions demo;
  auto* demo_cmd = app.add_subcommand(
      "make-demo-data", "Write the shapes VQA set and a tiny Qwen2-VL folder (DIR/model)");
  demo_cmd->add_option("dir", demo.dir, "Output folder")->required();
  demo_cmd->add_option("--train", demo.train, "Training samples")->capture_default_str();
  demo_cmd->add_option("--eval", demo.eval, "Evaluation samples (other images)")
      ->capture_default_str();
  demo_cmd->add_option("--seed", demo.seed, "Images, questions and model init")
      ->capture_default_str();
  demo_cmd->add_option("--image-size", demo.image_size, "Square image side in pixels (>= 56)")
      ->capture_default_str();
  demo_cmd->add_flag("--blank-images", demo.blank_images,
                     "Draw backgrounds only (the control: same answers, nothing to see)");

  EstimateOptions estimate;
  auto* est_cmd = app.add_subcommand("estimate", "Per-rank memory estimate of an experiment");
  est_cmd->add_option("config", estimate.config, "Experiment TOML")->required();
  est_cmd->add_option("--world-size", estimate.world_size,
                      "Ranks (default launch.nnodes * launch.nproc_per_node)");
  est_cmd->add_option("--local-world-size", estimate.local_world_size,
                      "Ranks per node (default launch.nproc_per_node)");
  est_cmd->add_option("--set", estimate.overrides, "Override a field: --set train.lr=1e-3");
  est_cmd->add_flag("--json", estimate.json, "One JSON object (bytes)");

  ForwardOptions forward;
  auto* fwd_cmd =
      app.add_subcommand("forward", "Logits and loss of every SFT sample (one process, unsharded)");
  fwd_cmd->add_option("--model", forward.model, "Hugging Face model folder")->required();
  fwd_cmd->add_option("--data", forward.data, "SFT JSONL file")->required();
  fwd_cmd->add_option("--out", forward.out, "Output safetensors file")->required();
  fwd_cmd->add_option("--dtype", forward.dtype, "Compute dtype")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();

  TokenizeOptions tokenize;
  auto* tok_cmd =
      app.add_subcommand("tokenize", "Token ids of stdin (one string) as one JSON array");
  tok_cmd
      ->add_option("--tokenizer", tokenize.tokenizer,
                   "Model folder with tokenizer.json, or the file")
      ->required();

  BenchStepOptions bench;
  auto* bench_cmd = app.add_subcommand(
      "bench-step",
      "Time forward+backward (no optimizer) of the model on the first train batch, 1 process: "
      "`step` events per pass, `done` objective = median tokens/s (issue #4 benchmark)");
  bench_cmd->add_option("config", bench.config, "Experiment TOML (data.format = \"tokens\")")
      ->required();
  bench_cmd->add_option("--set", bench.overrides, "Override a field: --set data.seq_len=256");
  bench_cmd->add_option("--iters", bench.iters, "Timed passes")->capture_default_str();
  bench_cmd->add_option("--warmup", bench.warmup, "Untimed passes first")->capture_default_str();
  bench_cmd->add_flag("--plain", bench.plain,
                      "Plain autograd parameters instead of the sharding engine");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitConfig;
  }
  if (cmd->parsed()) return run_guarded([&] { return run_selftest(selftest); });
  if (est_cmd->parsed()) return run_guarded([&] { return run_estimate(estimate); });
  // forward's contract: bad input of any kind exits 1 (after its `error` event).
  if (fwd_cmd->parsed())
    return run_guarded([&] { return run_forward(forward); }) == kExitOk ? kExitOk : kExitFailed;
  if (tok_cmd->parsed()) return run_guarded([&] { return run_tokenize(tokenize); });
  if (train_cmd->parsed()) return run_guarded([&] { return run_train(train); });
  if (export_cmd->parsed()) return run_guarded([&] { return run_export(exporting); });
  if (gen_cmd->parsed()) return run_guarded([&] { return run_generate(gen); });
  if (demo_cmd->parsed()) return run_guarded([&] { return run_make_demo_data(demo); });
  if (bench_cmd->parsed()) return run_guarded([&] { return run_bench_step(bench); });
  return kExitConfig;
}
