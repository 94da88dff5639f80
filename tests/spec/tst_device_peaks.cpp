#include <QTest>

#include "spec/device_peaks.h"

using namespace shardscope::spec;

// The MFU denominator on CUDA: the datasheet's dense peak of the GPU by the name CUDA reports.
class TestDevicePeaks : public QObject {
  Q_OBJECT

 private slots:
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
