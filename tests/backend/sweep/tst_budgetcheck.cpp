// The sweep's memory check (estimateAgainstBudget) on chat data, torch-free: the crafted set's
// short samples (tests/data/crafted_data.h) bound the estimate's rows, returned as
// BudgetCheck::rows, which the trial passes to its replan ladder: with it, a plan the data.seq_len
// bound would pass over fits and runs. A file this machine cannot read leaves the seq_len bound.
#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <string>
#include <vector>

#include "backend/sweep/trialrunner.h"
#include "spec/estimate.h"
#include "spec/experiment.h"
#include "spec/replan.h"
#include "tests/data/crafted_data.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;

class TestBudgetCheck : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  crafted::Files m_files;

  // The crafted set on Qwen2-VL-2B's config.json: 2 ranks of `micro` unpacked samples, LoRA.
  spec::Experiment chat(std::int64_t micro, const std::string& train) {
    const std::string text = "[model]\narch = \"qwen2_vl\"\npath = \"" + m_files.model +
                             "\"\n[data]\nformat = \"chat\"\ntrain_path = \"" + train +
                             "\"\nseq_len = 2048\npack = false\n[train]\nbatch_size = 8\n"
                             "micro_batch_size = " +
                             std::to_string(micro) +
                             "\n[lora]\nenabled = true\n[launch]\nnproc_per_node = 2\n";
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    auto exp = spec::parse_experiment(text, "chat.toml", {}, noPaths);
    if (!exp) qFatal("%s", exp.message().c_str());
    return *exp;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(crafted::write(m_dir.path().toStdString(), m_files));
  }

  void theDataBoundGoesFromTheCheckToTheLadder() {
    const spec::Experiment ran = chat(4, m_files.good);
    auto check = backend::estimateAgainstBudget(ran, spec::DeviceBudget{});
    VERIFY_OK(check);
    QVERIFY(check->rows.has_value());
    QCOMPARE(check->rows->samples, std::int64_t{4});
    QVERIFY(check->rows->longest > 0 && check->rows->longest < 2048);
    // A budget that holds micro-batch 2 by the data's rows, not by data.seq_len's.
    auto two =
        backend::estimateAgainstBudget(chat(2, m_files.good), spec::DeviceBudget{0, "", false});
    VERIFY_OK(two);
    const spec::DeviceBudget budget{two->need, "the test's budget", false};
    auto twoBySeqLen = spec::estimate_memory(chat(2, m_files.good), 2, 2);
    VERIFY_OK(twoBySeqLen);
    QVERIFY(spec::budgeted_bytes(*twoBySeqLen, budget) > budget.bytes);
    auto plan = spec::next_plan(ran, {}, budget, &*check->rows);
    VERIFY_OK(plan);
    QCOMPARE(plan->overrides, std::vector<std::string>{"train.micro_batch_size=2"});
    QVERIFY(plan->skipped.empty());
    auto bySeqLen = spec::next_plan(ran, {}, budget);
    QVERIFY(!bySeqLen || bySeqLen->overrides != plan->overrides);
    const std::string why = bySeqLen ? bySeqLen->skipped.at(0) : bySeqLen.message();
    QVERIFY2(why.find("4 -> 2") != std::string::npos && why.find("exceeds") != std::string::npos,
             why.c_str());
  }

  void unreadableDataLeavesTheSeqLenBound() {
    const spec::Experiment exp = chat(4, m_dir.filePath("missing.jsonl").toStdString());
    auto check = backend::estimateAgainstBudget(exp, spec::DeviceBudget{});
    VERIFY_OK(check);
    QVERIFY(!check->rows.has_value());
    auto bySeqLen = spec::estimate_memory(exp, 2, 2);
    VERIFY_OK(bySeqLen);
    QCOMPARE(check->need, bySeqLen->total);
  }
};

QTEST_GUILESS_MAIN(TestBudgetCheck)
#include "tst_budgetcheck.moc"
