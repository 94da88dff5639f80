#include <QTest>

#include "spec/device_peaks.h"
#include "spec/model_shape.h"

using namespace shardscope::spec;

// The MFU denominator on CUDA: the datasheet's dense peak of the GPU by the name CUDA reports.
class TestDevicePeaks : public QObject {
  Q_OBJECT

 private slots:
  // MFU's FLOPs per token against the published parameter counts of two tied Qwen2 models: with
  // a tied head the embedding counted once stands for the head's matmul, so 6 x all parameters
  // plus attention's 12 L C T.
  void flopsPerTokenFromPublishedCounts() {
    Qwen2Dims half;  // Qwen2-0.5B: 494,032,768 parameters
    half.vocab_size = 151936;
    half.hidden_size = 896;
    half.intermediate_size = 4864;
    half.num_layers = 24;
    half.num_heads = 14;
    half.num_kv_heads = 2;
    half.tie_word_embeddings = true;
    QCOMPARE(training_flops_per_token(half, 4096), 6.0 * 494032768 + 12.0 * 24 * 896 * 4096);
    Qwen2Dims big = half;  // Qwen2-1.5B: 1,543,714,304 parameters
    big.hidden_size = 1536;
    big.intermediate_size = 8960;
    big.num_layers = 28;
    big.num_heads = 12;
    QCOMPARE(training_flops_per_token(big, 2048), 6.0 * 1543714304 + 12.0 * 28 * 1536 * 2048);
    // Untied, the head is counted the same: the formula does not look at the tie.
    big.tie_word_embeddings = false;
    QCOMPARE(training_flops_per_token(big, 2048), 6.0 * 1543714304 + 12.0 * 28 * 1536 * 2048);
  }
  void knownDevicesByCudaName() {
    QCOMPARE(*dense_peak_flops("NVIDIA H100 80GB HBM3", PeakDType::bf16), 989.4e12);
    QCOMPARE(*dense_peak_flops("NVIDIA H100 PCIe", PeakDType::bf16), 756.0e12);
    QCOMPARE(*dense_peak_flops("NVIDIA H200", PeakDType::bf16), 989.4e12);
    QCOMPARE(*dense_peak_flops("NVIDIA A100-SXM4-80GB", PeakDType::bf16), 312.0e12);
    QCOMPARE(*dense_peak_flops("NVIDIA A100-SXM4-80GB", PeakDType::fp32), 19.5e12);
    QCOMPARE(*dense_peak_flops("NVIDIA A100-SXM4-80GB", PeakDType::tf32), 156.0e12);
    QCOMPARE(*dense_peak_flops("NVIDIA GeForce RTX 4090", PeakDType::fp16), 165.2e12);
  }

  void specificNamesWinOverPrefixes() {
    // "L40S" contains "L4", and "H100 PCIe" contains "H100": the specific row must be chosen.
    QCOMPARE(*dense_peak_flops("NVIDIA L40S", PeakDType::bf16), 362.0e12);
    QCOMPARE(*dense_peak_flops("NVIDIA L4", PeakDType::bf16), 121.0e12);
  }

  void unknownDeviceHasNone() {
    QVERIFY(!dense_peak_flops("Tesla K80", PeakDType::bf16).has_value());
    QVERIFY(!dense_peak_flops("", PeakDType::fp32).has_value());
  }
};

QTEST_APPLESS_MAIN(TestDevicePeaks)
#include "tst_device_peaks.moc"
