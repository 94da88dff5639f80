// Compare shows a study's sampler, and for sampler = "auto" (the default) the choice the study
// stored: which sampler proposes which trials (the switch point). A real study made through
// Study::create on a SQLite run log, six trials asked and told through it, then the panel as a
// user sees it (a screenshot in tests/artifacts/compare-auto.png).
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

#include "backend/store/runstore.h"
#include "backend/sweep/study.h"
#include "tests/support/paths.h"
#include "ui/compare/comparepanel.h"
#include "ui/data/runlog.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

constexpr int kWaitMs = 30000;

const char* const kExperiment = R"([search]
name = "auto-sweep"
seed = 3
n_trials = 20
[search.space.x]
type = "float"
low = -2.0
high = 2.0
[search.space.y]
type = "float"
low = -2.0
high = 2.0
)";

}  // namespace

class TestCompareAuto : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;

 private slots:
  void compareShowsTheAutoChoice() {
    QVERIFY(m_dir.isValid());
    const QString exp = m_dir.filePath("auto-sweep.toml");
    {
      QFile f(exp);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(kExperiment);
    }
    {
      auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
      QVERIFY2(store, store ? "" : store.message().c_str());
      auto study = search::Study::create(**store, exp, {});
      QVERIFY2(study, study ? "" : study.message().c_str());
      QVERIFY(study->autoChoice().has_value());
      for (int i = 0; i < 6; ++i) {
        auto asked = study->ask();
        QVERIFY2(asked, asked ? "" : asked.message().c_str());
        const double x = std::get<double>(asked->params.at("x"));
        const double y = std::get<double>(asked->params.at("y"));
        QVERIFY(study->tell(asked->number, {(x - 0.5) * (x - 0.5) + y * y}));
      }
      (*store)->flush();
    }
    RunLog runLog(50);
    ComparePanel panel(runLog);
    panel.resize(1600, 900);
    panel.show();
    runLog.open(m_dir.filePath("runs.db"));
    panel.showSweep(-1);
    QTRY_VERIFY_WITH_TIMEOUT(panel.isLoaded(), kWaitMs);
    auto* summary = panel.findChild<QLabel*>(QStringLiteral("sweepSummary"));
    QVERIFY(summary != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(summary->text().startsWith(QStringLiteral("6 trials")), kWaitMs);
    QVERIFY2(summary->text().endsWith(QStringLiteral(
                 "; sampler auto: gp for trials 0-99, then tpe (a space of 2 parameters)")),
             qPrintable(summary->text()));
    QCOMPARE(summary->toolTip(), summary->text());
    // Seen as a user sees it: the label is on screen, inside the panel, with its text.
    QVERIFY(summary->isVisible());
    QVERIFY(summary->width() > 200);
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(panel.grab().save(artifacts + "/compare-auto.png"));
  }
};

QTEST_MAIN(TestCompareAuto)
#include "tst_compareauto.moc"
