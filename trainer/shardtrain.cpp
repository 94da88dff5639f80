// shardtrain: the trainer executable. One process per rank; see docs/trainer.md for the
// contract (verbs, rendezvous environment, events on stdout, logs on stderr). main() only wires.
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "spec/version.h"
#include "trainer/base/fatal.h"
#include "trainer/cli/bench_step.h"
#include "trainer/cli/estimate.h"
#include "trainer/cli/forward.h"
#include "trainer/cli/make_demo_data.h"
#include "trainer/cli/selftest.h"
#include "trainer/cli/tokenize.h"
#include "trainer/run/train.h"

namespace {

using namespace shardscope::trainer;

// `selftest`: start local ranks and check the collectives.
CLI::App* add_selftest(CLI::App& app, SelftestOptions& selftest) {
  auto* cmd =
      app.add_subcommand("selftest", "Start local ranks and check the collectives (Gloo, NCCL)");
  cmd->add_option("--world-size", selftest.world_size, "Ranks to start when no rendezvous is set")
      ->capture_default_str();
  cmd->add_option("--timeout-s", selftest.timeout_s, "Rendezvous and collective timeout, seconds")
      ->capture_default_str();
  cmd->add_option("--fault-rank", selftest.fault_rank,
                  "This rank misbehaves, to check failure detection");
  cmd->add_option("--fault-mode", selftest.fault_mode,
                  "exit: leave before the collectives; hang: never answer")
      ->check(CLI::IsMember({"exit", "hang"}));
  cmd->add_option("--device", selftest.device,
                  "Where the tensors live: cpu (default), cuda, or auto (CUDA when visible)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--backend", selftest.backend,
                  "CUDA tensors through: auto or nccl (NCCL, one GPU per rank), or gloo (host "
                  "memory, ranks may share a GPU)")
      ->check(CLI::IsMember({"auto", "nccl", "gloo"}));
  cmd->add_flag("--no-shortcut", selftest.no_shortcut,
                "A world of one still runs every collective through Gloo or NCCL (one GPU "
                "creates a real NCCL communicator)");
  return cmd;
}

// --resume as given: once, or twice as "auto" and a folder (a requeued Slurm job appends
// `--resume auto` to a retry's `--resume FOLDER`).
std::vector<std::string> g_resume_given;

int resolve_resume(TrainOptions& train) {
  if (g_resume_given.size() == 1) train.resume = g_resume_given.front();
  if (g_resume_given.size() == 2) {
    const bool first_auto = g_resume_given[0] == "auto";
    const auto& other = g_resume_given[first_auto ? 1 : 0];
    if ((first_auto || g_resume_given[1] == "auto") && other != "auto") {
      train.resume = "auto";
      train.resume_fallback = other;
    }
  }
  if (g_resume_given.size() > 1 && train.resume.empty()) {
    std::fprintf(stderr,
                 "shardtrain train: --resume given %zu times; give it once, or twice as auto and "
                 "a checkpoint folder\n",
                 g_resume_given.size());
    return 2;
  }
  return 0;
}

// `train`: one rank of a run.
CLI::App* add_train(CLI::App& app, TrainOptions& train) {
  auto* cmd = app.add_subcommand("train", "Train one rank (torchrun/Slurm environment)");
  cmd->add_option("config", train.config, "Experiment TOML (trial.toml)")->required();
  cmd->add_option("--resume", g_resume_given,
                  "auto: the newest complete checkpoint of the run, or a checkpoint folder; "
                  "both (auto and a folder): the run's newest when it has one, else the folder")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--trace", train.trace,
                  "Write every collective's issue/wait and state placement to FILE "
                  "(FILE.rank-N on other ranks)");
  cmd->add_option("--set", train.overrides, "Override a field: --set train.lr=1e-3");
  cmd->add_option("--run-dir", train.run_dir, "Run directory (checkpoints go to ckpt/)")
      ->capture_default_str();
  cmd->add_option("--dump-params", train.dump_params,
                  "Write the final full parameters to FILE (safetensors), for tests");
  cmd->add_option("--dump-grads", train.dump_grads,
                  "Write the first step's full reduced gradients to FILE (safetensors), before "
                  "clipping and the optimizer step, for tests");
  cmd->add_flag("--reference", train.reference,
                "Unsharded plain-autograd reference (one process), for parity tests");
  cmd->add_option("--export", train.export_dir,
                  "After the last step, write the model as a Hugging Face folder to DIR "
                  "(with LoRA: merged weights, and the PEFT adapter in DIR/adapter)");
  return cmd;
}

// `export`: a checkpoint as a Hugging Face folder.
CLI::App* add_export(CLI::App& app, TrainOptions& exporting) {
  auto* cmd = app.add_subcommand(
      "export", "Write a checkpoint as a Hugging Face folder (one process, any world size saved)");
  cmd->add_option("config", exporting.config, "Experiment TOML of the run")->required();
  cmd->add_option("--checkpoint", exporting.resume, "Checkpoint folder, or auto: the newest")
      ->required();
  cmd->add_option("--out", exporting.export_dir, "Output folder")->required();
  cmd->add_option("--run-dir", exporting.run_dir, "Run directory (for --checkpoint auto)")
      ->capture_default_str();
  cmd->add_option("--set", exporting.overrides, "Override a field: --set lora.r=16");
  return cmd;
}

// `generate`: answers of the eval set under sharding.
CLI::App* add_generate(CLI::App& app, TrainOptions& gen) {
  auto* cmd = app.add_subcommand(
      "generate", "Generate the answers of data.eval_path under sharding (launched like train)");
  cmd->add_option("config", gen.config, "Experiment TOML")->required();
  cmd->add_option("--out", gen.generate_out,
                  "Answers as JSON lines to FILE (FILE.rank-N on other ranks)")
      ->required();
  cmd->add_option("--checkpoint", gen.resume, "Checkpoint folder, or auto: the newest");
  cmd->add_option("--run-dir", gen.run_dir, "Run directory (for --checkpoint auto)")
      ->capture_default_str();
  cmd->add_option("--set", gen.overrides, "Override a field: --set eval.max_new_tokens=8");
  cmd->add_flag("--no-cache", gen.no_cache,
                "Recompute the whole sequence every step instead of the key/value cache");
  cmd->add_flag("--reference", gen.reference, "Unsharded plain-autograd model (one process)");
  return cmd;
}

// `make-demo-data`: the shapes VQA set and its tiny model.
CLI::App* add_make_demo_data(CLI::App& app, MakeDemoDataOptions& demo) {
  auto* cmd =
      app.add_subcommand("make-demo-data",
                         "Write the shapes VQA set, its probes (DIR/probes.jsonl) and a tiny "
                         "Qwen2-VL folder (DIR/model)");
  cmd->add_option("dir", demo.dir, "Output folder")->required();
  cmd->add_option("--train", demo.train, "Training samples")->capture_default_str();
  cmd->add_option("--eval", demo.eval, "Evaluation samples (other images)")->capture_default_str();
  cmd->add_option("--seed", demo.seed, "Images, questions and model init")->capture_default_str();
  cmd->add_option("--image-size", demo.image_size, "Square image side in pixels (>= 56)")
      ->capture_default_str();
  cmd->add_flag("--blank-images", demo.blank_images,
                "Draw backgrounds only (the control: same answers, nothing to see)");
  return cmd;
}

// `estimate`: the per-rank memory estimate.
CLI::App* add_estimate(CLI::App& app, EstimateOptions& estimate) {
  auto* cmd = app.add_subcommand("estimate", "Per-rank memory estimate of an experiment");
  cmd->add_option("config", estimate.config, "Experiment TOML")->required();
  cmd->add_option("--world-size", estimate.world_size,
                  "Ranks (default launch.nnodes * launch.nproc_per_node)");
  cmd->add_option("--local-world-size", estimate.local_world_size,
                  "Ranks per node (default launch.nproc_per_node)");
  cmd->add_option("--set", estimate.overrides, "Override a field: --set train.lr=1e-3");
  cmd->add_flag("--json", estimate.json, "One JSON object (bytes)");
  return cmd;
}

// `forward`: logits and loss of every sample.
CLI::App* add_forward(CLI::App& app, ForwardOptions& forward) {
  auto* cmd =
      app.add_subcommand("forward", "Logits and loss of every SFT sample (one process, unsharded)");
  cmd->add_option("--model", forward.model, "Hugging Face model folder")->required();
  cmd->add_option("--data", forward.data, "SFT JSONL file")->required();
  cmd->add_option("--out", forward.out, "Output safetensors file")->required();
  cmd->add_option("--dtype", forward.dtype, "Compute dtype")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  return cmd;
}

// `tokenize`: token ids of stdin.
CLI::App* add_tokenize(CLI::App& app, TokenizeOptions& tokenize) {
  auto* cmd = app.add_subcommand("tokenize", "Token ids of stdin (one string) as one JSON array");
  cmd->add_option("--tokenizer", tokenize.tokenizer,
                  "Model folder with tokenizer.json, or the file")
      ->required();
  return cmd;
}

// `bench-step`: timed forward+backward passes.
CLI::App* add_bench_step(CLI::App& app, BenchStepOptions& bench) {
  auto* cmd = app.add_subcommand(
      "bench-step",
      "Time forward+backward (no optimizer) of the model on the first train batch, 1 process: "
      "`step` events per pass, `done` objective = median tokens/s (issue #4 benchmark)");
  cmd->add_option("config", bench.config, "Experiment TOML (data.format = \"tokens\")")->required();
  cmd->add_option("--set", bench.overrides, "Override a field: --set data.seq_len=256");
  cmd->add_option("--iters", bench.iters, "Timed passes")->capture_default_str();
  cmd->add_option("--warmup", bench.warmup, "Untimed passes first")->capture_default_str();
  cmd->add_flag("--plain", bench.plain, "Plain autograd parameters instead of the sharding engine");
  return cmd;
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (RLIMIT_FSIZE, a quota) makes a write fail with EFBIG, reported as an io
  // error naming the file, instead of killing the process with no word of why.
  std::signal(SIGXFSZ, SIG_IGN);
  // A write to a socket or pipe whose reader is gone (Gloo's pair to a rank that died, the
  // launcher's end of stdout) fails with EPIPE, reported as peer_lost or an io error, instead of
  // killing the rank with no error event (launchers start ranks with SIGPIPE's default).
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"shardtrain: the Shardscope trainer (FSDP semantics on LibTorch c10d)",
               "shardtrain"};
  app.set_version_flag("--version", std::string("shardtrain ") + shardscope::kVersion);
  app.require_subcommand(1);

  SelftestOptions selftest;
  TrainOptions train;
  TrainOptions exporting;
  TrainOptions gen;
  MakeDemoDataOptions demo;
  EstimateOptions estimate;
  ForwardOptions forward;
  TokenizeOptions tokenize;
  BenchStepOptions bench;
  // Each verb and what runs it when it is the one parsed.
  const std::vector<std::pair<CLI::App*, std::function<int()>>> verbs = {
      {add_selftest(app, selftest), [&] { return run_selftest(selftest); }},
      {add_train(app, train),
       [&] {
         if (const int bad = resolve_resume(train); bad != 0) return bad;
         return run_train(train);
       }},
      {add_export(app, exporting), [&] { return run_export(exporting); }},
      {add_generate(app, gen), [&] { return run_generate(gen); }},
      {add_make_demo_data(app, demo), [&] { return run_make_demo_data(demo); }},
      {add_estimate(app, estimate), [&] { return run_estimate(estimate); }},
      {add_forward(app, forward), [&] { return run_forward(forward); }},
      {add_tokenize(app, tokenize), [&] { return run_tokenize(tokenize); }},
      {add_bench_step(app, bench), [&] { return run_bench_step(bench); }},
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitConfig;
  }
  for (const auto& [cmd, run] : verbs) {
    if (!cmd->parsed()) continue;
    const int code = run_guarded(run);
    // forward's contract: bad input of any kind exits 1 (after its `error` event).
    if (cmd->get_name() == "forward" && code != kExitOk) return kExitFailed;
    return code;
  }
  return kExitConfig;
}
