// The memory a trial is held against, as the backend detects it (backend/ssh/hostcheck.h,
// backend/sweep/trialrunner.h budgetFor): the local host check runs the same nvidia-smi query
// as the SSH host check and reads this machine's physical memory; launch.gpus picks the GPUs;
// launch.device_memory_gib always wins; Slurm without it is a config error naming the field;
// a CPU run shares the host's memory among its ranks.
//
// This machine has no NVIDIA GPU, so besides the real query (which finds none here and the
// GPUs on a GPU machine) an `nvidia-smi` script first on PATH answers with two GPUs in
// nvidia-smi's own csv,noheader,nounits format, to check the parsing and the choice of GPU.
#include <QDir>
#include <QFile>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

#include "backend/ssh/hostcheck.h"
#include "backend/sweep/trialrunner.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;

namespace {

qint64 physicalMemory() {
  return qint64(::sysconf(_SC_PHYS_PAGES)) * qint64(::sysconf(_SC_PAGESIZE));
}

// Puts a script named nvidia-smi first on PATH for the life of the object.
class FakeSmi {
 public:
  explicit FakeSmi(const QString& output) {
    const QString path = m_dir.filePath("nvidia-smi");
    QFile f(path);
    if (f.open(QIODevice::WriteOnly)) {
      f.write(("#!/bin/sh\ncat <<'EOF'\n" + output + "EOF\n").toUtf8());
      f.close();
      f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    }
    m_path = qgetenv("PATH");
    qputenv("PATH", (m_dir.path() + ":").toUtf8() + m_path);
  }
  ~FakeSmi() { qputenv("PATH", m_path); }
  FakeSmi(const FakeSmi&) = delete;
  FakeSmi& operator=(const FakeSmi&) = delete;

 private:
  QTemporaryDir m_dir;
  QByteArray m_path;
};

const QString kTwoGpus = QStringLiteral(
    "0, NVIDIA H100 80GB HBM3, 81559\n"
    "1, NVIDIA A100-SXM4-40GB, 40960\n");

spec::Experiment localExperiment() {
  spec::Experiment exp;
  exp.launch.kind = spec::LaunchKind::local;
  exp.launch.nproc_per_node = 2;
  return exp;
}

}  // namespace

class TestBudget : public QObject {
  Q_OBJECT

 private slots:
  void parsesNvidiaSmisQuery() {
    const auto gpus = backend::parseGpuQuery(kTwoGpus + "garbage line\n");
    QCOMPARE(gpus.size(), 2);
    QCOMPARE(gpus[0].index, 0);
    QCOMPARE(gpus[0].name, QString("NVIDIA H100 80GB HBM3"));
    QCOMPARE(gpus[0].memoryBytes, qint64(81559) * 1024 * 1024);
    QCOMPARE(gpus[1].memoryBytes, qint64(40960) * 1024 * 1024);
  }

  void theLocalCheckReadsThisMachine() {
    const auto outcome = backend::checkLocalMemory();
    QCOMPARE(outcome.hostMemoryBytes, physicalMemory());
    const bool smi = !QStandardPaths::findExecutable("nvidia-smi").isEmpty();
    if (!smi) QVERIFY(outcome.gpuInfo.isEmpty());
    auto detected = backend::detectMemory(localExperiment().launch);
    VERIFY_OK(detected);
    QCOMPARE(detected->host_bytes, physicalMemory());
    QCOMPARE(detected->host_source, std::string("this machine"));
    if (!smi) {
      // No GPU here: a CPU run, the host's memory shared by the 2 ranks.
      auto budget = backend::budgetFor(localExperiment());
      VERIFY_OK(budget);
      QVERIFY(!budget->gpu);
      QCOMPARE(budget->bytes, physicalMemory() / 2);
      QVERIFY2(budget->source.find("this machine") != std::string::npos, budget->source.c_str());
    }
  }

  void theSmallestGpuOfTheLaunchIsTheBudget() {
    FakeSmi smi(kTwoGpus);
    auto exp = localExperiment();
    auto all = backend::budgetFor(exp);
    VERIFY_OK(all);
    QVERIFY(all->gpu);
    QCOMPARE(all->bytes, qint64(40960) * 1024 * 1024);
    QVERIFY2(all->source == "nvidia-smi on this machine: GPU 1, NVIDIA A100-SXM4-40GB",
             all->source.c_str());
    exp.launch.gpus = {0};
    exp.launch.nproc_per_node = 1;
    auto first = backend::budgetFor(exp);
    VERIFY_OK(first);
    QCOMPARE(first->bytes, qint64(81559) * 1024 * 1024);
    // A CPU run ignores the GPUs.
    exp.shard.device = "cpu";
    auto cpu = backend::budgetFor(exp);
    VERIFY_OK(cpu);
    QVERIFY(!cpu->gpu);
    QCOMPARE(cpu->bytes, physicalMemory());
  }

  void theFieldAlwaysWinsAndSlurmNeedsIt() {
    FakeSmi smi(kTwoGpus);
    auto exp = localExperiment();
    exp.launch.device_memory_gib = 16;
    auto field = backend::budgetFor(exp);
    VERIFY_OK(field);
    QCOMPARE(field->bytes, qint64(16) << 30);
    QCOMPARE(field->source, std::string("launch.device_memory_gib = 16"));
    exp.launch.kind = spec::LaunchKind::slurm;
    VERIFY_OK(backend::budgetFor(exp));
    exp.launch.device_memory_gib = 0;
    auto slurm = backend::budgetFor(exp);
    QVERIFY(!slurm.ok());
    QVERIFY2(slurm.message().find("launch.device_memory_gib: required for launch.kind = "
                                  "\"slurm\"") != std::string::npos,
             slurm.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestBudget)
#include "tst_budget.moc"
