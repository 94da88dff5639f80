// tst_replan: the replan ladder (spec/replan.h) on the tiny model, torch-free: the next plan after
// an out-of-memory halves the micro-batch (the global batch and the accumulation say so), then
// turns on activation checkpointing, then the offloads, in that order; a plan the estimate says
// does not fit the budget is passed over; a searched field is never changed; with nothing left
// the error says why each plan was passed over; chat data's rows are bounded as the caller's
// memory check bounded them (the data's samples), so a plan the data.seq_len bound would refuse
// runs.
#include <QTest>

#include <algorithm>
#include <string>
#include <vector>

#include "spec/estimate.h"
#include "spec/experiment.h"
#include "spec/replan.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"

using namespace shardscope::spec;

namespace {

// 2 ranks, a global batch of 16, 8 samples per rank per forward: no accumulation.
const char* kTiny = R"([model]
arch = "tiny"
tiny_hidden_size = 64
tiny_layers = 2
tiny_max_seq_len = 128
[data]
train_path = "train.jsonl"
format = "tokens"
seq_len = 128
[train]
batch_size = 16
micro_batch_size = 8
[launch]
nproc_per_node = 2
)";

Experiment tiny(const std::vector<std::string>& overrides = {}) {
  LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = parse_experiment(kTiny, "tiny.toml", overrides, noPaths);
  if (!exp) qFatal("%s", exp.message().c_str());
  return *exp;
}

std::int64_t need(const Experiment& exp) {
  auto e = estimate_memory(exp, 2, 2);
  if (!e) qFatal("%s", e.message().c_str());
  return budgeted_bytes(*e, DeviceBudget{1, "test", false});
}

DeviceBudget budget(std::int64_t bytes) { return DeviceBudget{bytes, "the test's budget", false}; }

// Chat data on Qwen2-VL-2B's published config.json (no weights: the estimate reads config.json):
// LoRA, 2 ranks of 4 unpacked samples of up to 2048 tokens.
Experiment chat(std::int64_t micro_batch) {
  const std::string model =
      (shardscope::testing::sourceDir() + "/examples/models/qwen2-vl-2b").toStdString();
  const std::string text = "[model]\narch = \"qwen2_vl\"\npath = \"" + model +
                           "\"\n[data]\ntrain_path = \"train.jsonl\"\nformat = \"chat\"\n"
                           "seq_len = 2048\npack = false\n[train]\nbatch_size = 8\n"
                           "micro_batch_size = " +
                           std::to_string(micro_batch) +
                           "\n[lora]\nenabled = true\n[shard]\nprecision = \"bf16\"\n"
                           "[launch]\nnproc_per_node = 2\n";
  LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = parse_experiment(text, "chat.toml", {}, noPaths);
  if (!exp) qFatal("%s", exp.message().c_str());
  return *exp;
}

std::int64_t need(const Experiment& exp, const DataBound* data) {
  auto e = estimate_memory(exp, 2, 2, data);
  if (!e) qFatal("%s", e.message().c_str());
  return budgeted_bytes(*e, DeviceBudget{1, "test", false});
}

}  // namespace

class TestReplan : public QObject {
  Q_OBJECT

 private slots:
  // The first rung: half the micro-batch, twice the accumulation, the same global batch.
  void halvesTheMicroBatch() {
    const Experiment ran = tiny();
    auto plan = next_plan(ran, {}, budget(0));
    VERIFY_OK(plan);
    QCOMPARE(plan->overrides, std::vector<std::string>{"train.micro_batch_size=4"});
    QCOMPARE(plan->change,
             std::string("train.micro_batch_size 8 -> 4 (gradient accumulation 1 -> 2)"));
    QCOMPARE(plan->experiment.train.micro_batch_size, std::int64_t{4});
    QCOMPARE(plan->experiment.train.batch_size, ran.train.batch_size);
    QCOMPARE(grad_accumulation_steps(plan->experiment.train, 2), std::int64_t{2});
    QVERIFY(!plan->experiment.shard.activation_checkpointing);
    QVERIFY(plan->skipped.empty());
  }

  // micro_batch_size = 0 means batch / ranks (8 here): the ladder starts from that.
  void resolvesAnAutomaticMicroBatch() {
    auto plan = next_plan(tiny({"train.micro_batch_size=0"}), {}, budget(0));
    VERIFY_OK(plan);
    QCOMPARE(plan->overrides, std::vector<std::string>{"train.micro_batch_size=4"});
  }

  // The estimate says micro-batch 4 and 2 do not fit a budget just under 2's need: both are
  // passed over (each named with its estimate) and the plan is micro-batch 1.
  void skipsPlansTheEstimateRefuses() {
    const std::int64_t two = need(tiny({"train.micro_batch_size=2"}));
    const std::int64_t one = need(tiny({"train.micro_batch_size=1"}));
    QVERIFY2(one < two, "the tiny model's activations must grow with the micro-batch");
    auto plan = next_plan(tiny(), {}, budget(two - 1));
    VERIFY_OK(plan);
    QCOMPARE(plan->overrides, std::vector<std::string>{"train.micro_batch_size=1"});
    QCOMPARE(plan->skipped.size(), std::size_t{2});
    for (const std::string& s : plan->skipped) {
      QVERIFY2(s.find("exceeds") != std::string::npos, s.c_str());
    }
    QVERIFY2(plan->change.find("4 -> 2") != std::string::npos &&
                 plan->change.find("2 -> 1") != std::string::npos,
             plan->change.c_str());
  }

  // A searched micro-batch is never changed: the next plan is activation checkpointing.
  void neverChangesASearchedField() {
    const Experiment ran = tiny();
    auto plan = next_plan(ran, {"train.micro_batch_size", "train.lr"}, budget(0));
    VERIFY_OK(plan);
    QCOMPARE(plan->overrides, std::vector<std::string>{"shard.activation_checkpointing=true"});
    QCOMPARE(plan->experiment.train.micro_batch_size, ran.train.micro_batch_size);
    QCOMPARE(plan->experiment.train.lr, ran.train.lr);
    QCOMPARE(plan->skipped.size(), std::size_t{1});
    QVERIFY2(plan->skipped[0].find("train.micro_batch_size is searched") != std::string::npos,
             plan->skipped[0].c_str());
    // Searched too: the offloads come next, the optimizer's first.
    auto next =
        next_plan(ran, {"train.micro_batch_size", "shard.activation_checkpointing"}, budget(0));
    VERIFY_OK(next);
    QCOMPARE(next->overrides, std::vector<std::string>{"shard.offload_optimizer=true"});
  }

  // Micro-batch 1 with checkpointing already on: the offloads, optimizer then parameters.
  void walksTheRungsInOrder() {
    Experiment ran = tiny({"train.micro_batch_size=1", "shard.activation_checkpointing=true"});
    auto plan = next_plan(ran, {}, budget(0));
    VERIFY_OK(plan);
    QCOMPARE(plan->overrides, std::vector<std::string>{"shard.offload_optimizer=true"});
    auto after = next_plan(plan->experiment, {}, budget(0));
    VERIFY_OK(after);
    QCOMPARE(after->overrides, std::vector<std::string>{"shard.offload_params=true"});
    auto none = next_plan(after->experiment, {}, budget(0));
    QVERIFY(!none);
    QVERIFY2(none.message().find("no plan of the replan ladder is left") != std::string::npos,
             none.message().c_str());
  }

  // Nothing fits: the error names each plan passed over and why.
  void saysWhyNothingFits() {
    auto plan = next_plan(tiny(), {"train.lr"}, budget(1024));
    QVERIFY(!plan);
    const std::string& why = plan.message();
    for (const char* part : {"no plan of the replan ladder", "train.micro_batch_size 8 -> 4",
                             "shard.activation_checkpointing = true", "exceeds"}) {
      QVERIFY2(why.find(part) != std::string::npos, why.c_str());
    }
  }

  // Short chat samples (the longest 256 of data.seq_len's 2048 tokens) and a budget that holds
  // micro-batch 2 by the data's bound: the plan the trial's memory check bounded the same way
  // halves the micro-batch and runs, where the data.seq_len bound would pass it over.
  void theDataBoundLetsAPlanRunThatSeqLenWouldSkip() {
    DataBound data;
    data.add(120, 0);
    data.add(256, 64);
    data.source = "train.jsonl: 2 samples, the longest 256 tokens";
    const std::int64_t fits = need(chat(2), &data);
    QVERIFY2(need(chat(2), nullptr) > fits, "the seq_len bound must need more than the data's");
    const Experiment ran = chat(4);
    auto bySeqLen = next_plan(ran, {}, budget(fits));
    QVERIFY(!bySeqLen ||
            bySeqLen->overrides != std::vector<std::string>{"train.micro_batch_size=2"});
    const std::string why = bySeqLen ? bySeqLen->skipped.at(0) : bySeqLen.message();
    QVERIFY2(why.find("train.micro_batch_size 4 -> 2") != std::string::npos &&
                 why.find("exceeds") != std::string::npos,
             why.c_str());
    auto byData = next_plan(ran, {}, budget(fits), &data);
    VERIFY_OK(byData);
    QCOMPARE(byData->overrides, std::vector<std::string>{"train.micro_batch_size=2"});
    QVERIFY(byData->skipped.empty());
  }
};

QTEST_APPLESS_MAIN(TestReplan)
#include "tst_replan.moc"
