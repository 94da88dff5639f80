// The estimate's calibration (spec/calibration.h), store-free: the key names what a correction is
// kept for (architecture and size, device, precision, strategy, full / LoRA / QLoRA) and nothing
// else, the robust mean is the median of a few runs and the interquartile mean of more (one run
// that swapped moves nothing), and the corrected estimate scales the total and the device bytes
// while the terms and total_raw keep the formulas' figures, in the text and the JSON.
#include <QTest>

#include <cmath>
#include <nlohmann/json.hpp>

#include "spec/calibration.h"
#include "spec/estimate.h"
#include "spec/experiment.h"

using namespace shardscope::spec;

class TestCalibration : public QObject {
  Q_OBJECT

 private slots:
  void keyNamesTheKindOfRun() {
    Experiment exp;
    QCOMPARE(calibration_key(exp, 1000, false), std::string("tiny 1000 cpu fp32 FULL_SHARD full"));
    QCOMPARE(calibration_key(exp, 1000, true), std::string("tiny 1000 cuda fp32 FULL_SHARD full"));
    exp.lora.enabled = true;
    QCOMPARE(calibration_key(exp, 1000, false), std::string("tiny 1000 cpu fp32 FULL_SHARD lora"));
    exp.lora.quantize = "nf4";
    exp.shard.precision = PrecisionMode::bf16_autocast;
    exp.shard.strategy = ShardStrategy::no_shard;
    QCOMPARE(calibration_key(exp, 7, false),
             std::string("tiny 7 cpu bf16_autocast NO_SHARD qlora"));
    // What the correction does not depend on leaves the key alone: the batch, the data, the lr.
    Experiment other = exp;
    other.train.lr = 0.5;
    other.data.seq_len = 512;
    QCOMPARE(calibration_key(other, 7, false), calibration_key(exp, 7, false));
  }

  void robustMean() {
    QCOMPARE(robust_calibration({}), Calibration{});
    QCOMPARE(robust_calibration({2.0}), (Calibration{2.0, 1}));
    QCOMPARE(robust_calibration({2.0, 3.0, 100.0}), (Calibration{3.0, 3}));  // the median
    QCOMPARE(robust_calibration({2.0, 3.0}), (Calibration{2.5, 2}));
    // 8 runs: the lowest and highest 2 dropped, the middle 4 averaged.
    const auto c = robust_calibration({0.01, 1.0, 1.1, 1.2, 1.3, 1.4, 9.0, 50.0});
    QCOMPARE(c.runs, 8);
    QVERIFY(std::abs(c.ratio - 1.25) < 1e-12);
    // A run without a figure (no estimate, NaN) is no run.
    QCOMPARE(robust_calibration({std::nan(""), -1.0, 0.0, 2.0}), (Calibration{2.0, 1}));
  }

  void appliedToTheTotal() {
    Experiment exp;
    exp.data.train_path = "train.jsonl";  // not read by the estimate
    auto raw = estimate_memory(exp, 1, 1);
    QVERIFY2(raw, raw ? "" : raw.message().c_str());
    QCOMPARE(raw->total_raw, raw->total);
    const auto same = calibrated(*raw, {});
    QCOMPARE(same.total, raw->total);
    QCOMPARE(same.calibration_runs, 0);
    const auto e = calibrated(*raw, {2.0, 3});
    QCOMPARE(e.total, 2 * raw->total);
    QCOMPARE(e.device, 2 * raw->total);  // nothing offloaded: all on the device
    QCOMPARE(e.total_raw, raw->total);
    QCOMPARE(e.activations, raw->activations);  // the terms stay the formulas'
    QCOMPARE(format_calibration({2.0, 3}), std::string("calibrated on 3 runs: x2.00"));
    QCOMPARE(format_calibration({1.125, 1}), std::string("calibrated on 1 run: x1.12"));
    QVERIFY(format_calibration({}).starts_with("uncalibrated"));
    QVERIFY(format_estimate(e).find("calibrated on 3 runs: x2.00") != std::string::npos);
    QVERIFY(format_estimate(*raw).find("calibrated") == std::string::npos);
    const auto json = nlohmann::json::parse(estimate_json(e));
    QCOMPARE(json["total"].get<std::int64_t>(), e.total);
    QCOMPARE(json["total_raw"].get<std::int64_t>(), raw->total);
    QCOMPARE(json["calibration"]["runs"].get<int>(), 3);
    // Looked up by the kind of run: the table's other kinds leave this one raw.
    const Calibrations table{{calibration_key(exp, raw->params_total, false), {1.5, 4}},
                             {calibration_key(exp, raw->params_total, true), {9.0, 2}}};
    QCOMPARE(find_calibration(table, exp, *raw, false), (Calibration{1.5, 4}));
    exp.shard.strategy = ShardStrategy::no_shard;
    QCOMPARE(find_calibration(table, exp, *raw, false), Calibration{});
  }
};

QTEST_APPLESS_MAIN(TestCalibration)
#include "tst_calibration.moc"
