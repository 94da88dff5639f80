// The bundled demos' data on first use (backend/lifecycle/demodata.h): the shapes VQA demo is
// recognised from examples/shapes-vqa.toml as shipped (its data, model and probes in one folder)
// and not once a file lies elsewhere; missing data with no trainer to make it is an error that
// names the command to run; and with its files in place nothing is run again.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "backend/lifecycle/demodata.h"
#include "spec/experiment.h"
#include "tests/support/paths.h"

using namespace shardscope;

namespace {

spec::Experiment load(const QString& path, const std::vector<std::string>& overrides = {}) {
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  auto exp = spec::load_experiment(path.toStdString(), overrides, noPaths);
  if (!exp) qFatal("%s", exp.message().c_str());
  return *exp;
}

}  // namespace

class TestDemoData : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QString m_exp;  // a copy of examples/shapes-vqa.toml in m_dir

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_exp = m_dir.filePath("shapes-vqa.toml");
    QVERIFY(QFile::copy(testing::sourceDir() + "/examples/shapes-vqa.toml", m_exp));
  }

  void theShippedExampleIsTheShapesDemo() {
    const spec::Experiment exp = load(m_exp);
    QVERIFY(backend::isShapesDemo(exp));
    QVERIFY(!backend::isDemo(exp));
    QCOMPARE(QString::fromStdString(exp.eval.probes), m_dir.filePath("shapes-data/probes.jsonl"));
    QVERIFY(exp.eval.probe_max_new_tokens <= 8);  // the probes' cost stays small
    // A file elsewhere than make-demo-data writes it: not the demo, nothing is made for it.
    QVERIFY(!backend::isShapesDemo(load(m_exp, {"eval.probes=\"mine.jsonl\""})));
    QVERIFY(!backend::isShapesDemo(load(m_exp, {"model.path=\"other/model\""})));
    QVERIFY(!backend::isShapesDemo(load(m_exp, {"experiment.name=\"mine\""})));
    auto other = load(m_exp, {"eval.probes=\"mine.jsonl\""});
    auto untouched = backend::ensureDemoData(other);
    QVERIFY(untouched.ok() && !*untouched);
  }

  void missingDataWithoutATrainerNamesTheCommand() {
    const spec::Experiment exp = load(m_exp, {"launch.trainer=\"no-such-shardtrain\""});
    auto made = backend::ensureDemoData(exp);
    QVERIFY(!made.ok());
    const QString message = QString::fromStdString(made.message());
    QVERIFY2(message.contains("no-such-shardtrain") &&
                 message.contains("shardtrain make-demo-data " + m_dir.filePath("shapes-data")) &&
                 message.contains("--train 3000 --eval 400"),
             qPrintable(message));
    QVERIFY(!QFileInfo::exists(m_dir.filePath("shapes-data/train.jsonl")));
  }

  // Every file in place (empty ones do: only their presence is checked): nothing is run, even
  // with no trainer at all.
  void presentDataIsLeftAlone() {
    const QDir data(m_dir.filePath("shapes-data"));
    QVERIFY(data.mkpath("model"));
    for (const char* name : {"train.jsonl", "eval.jsonl", "probes.jsonl", "model/config.json",
                             "model/tokenizer.json", "model/model.safetensors"}) {
      QFile f(data.filePath(QLatin1String(name)));
      QVERIFY(f.open(QIODevice::WriteOnly));
    }
    auto made = backend::ensureDemoData(load(m_exp, {"launch.trainer=\"no-such-shardtrain\""}));
    QVERIFY2(made.ok() && !*made, made.ok() ? "" : made.message().c_str());
    // Without the probes (data made before make-demo-data wrote them) it is made again.
    QVERIFY(QFile::remove(data.filePath("probes.jsonl")));
    made = backend::ensureDemoData(load(m_exp, {"launch.trainer=\"no-such-shardtrain\""}));
    QVERIFY(!made.ok());
  }
};

QTEST_GUILESS_MAIN(TestDemoData)
#include "tst_demodata.moc"
