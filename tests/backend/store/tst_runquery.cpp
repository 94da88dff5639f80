// The runs filter's query language (backend/store/runquery.h): what each form matches on a few
// runs, negation and implicit AND, parameters before metrics, best against last, and a bad query's
// message naming the position, the token and what was expected.
#include <QTest>

#include "backend/store/runquery.h"

using namespace shardscope::backend;

namespace {

RunFacts run(const QString& name, const QString& status, QStringList tags, double lr,
             std::optional<double> lastLoss, std::optional<double> bestLoss) {
  RunFacts r;
  r.name = name;
  r.status = status;
  r.tags = std::move(tags);
  r.params.insert("train.lr", lr);
  r.params.insert("shard.strategy", "FULL_SHARD");
  if (lastLoss) r.last.insert("loss", *lastLoss);
  if (bestLoss) r.best.insert("loss", *bestLoss);
  r.last.insert("eval.loss", 2.0);
  r.best.insert("eval.loss", 1.9);
  r.words = {QString("train.lr=%1").arg(lr), "gpu-box"};
  return r;
}

RunFacts inGroups(RunFacts r, QStringList groups) {
  r.groups = std::move(groups);
  return r;
}

// The names of the runs `query` keeps, in order.
QStringList kept(const QString& text, const QList<RunFacts>& runs) {
  auto query = RunQuery::parse(text);
  if (!query) return {"error: " + QString::fromStdString(query.message())};
  QStringList names;
  for (const RunFacts& r : runs) {
    if (query->matches(r)) names << r.name;
  }
  return names;
}

}  // namespace

class TestRunQuery : public QObject {
  Q_OBJECT

  QList<RunFacts> m_runs = {
      inGroups(run("exp-1", "complete", {"best", "baseline"}, 1e-4, 1.5, 1.4),
               {"ablation", "lr/small"}),
      run("exp-2", "oom", {"draft"}, 3e-4, std::nullopt, std::nullopt),
      inGroups(run("sweep-3", "complete", {}, 1e-3, 1.7, 1.55), {"ablation"}),
      run("Sweep 4", "running", {"draft", "best"}, 5e-5, 2.1, 1.2),
  };

 private slots:
  void matches_data() {
    QTest::addColumn<QString>("query");
    QTest::addColumn<QStringList>("names");
    const QStringList all = {"exp-1", "exp-2", "sweep-3", "Sweep 4"};
    QTest::newRow("empty") << "" << all;
    QTest::newRow("spaces") << "   " << all;
    QTest::newRow("word in name, any case") << "SWEEP" << QStringList{"sweep-3", "Sweep 4"};
    // "k=v" is a comparison of parameter k (none of these runs has "lr"), no longer a word.
    QTest::newRow("k=v compares") << "lr=0.001" << QStringList{};
    QTest::newRow("k=v of a param") << "train.lr=0.001" << QStringList{"sweep-3"};
    QTest::newRow("word in host") << "gpu-box" << all;
    QTest::newRow("odd word") << "exp#1" << QStringList{};
    QTest::newRow("quoted word") << "\"sweep 4\"" << QStringList{"Sweep 4"};
    QTest::newRow("tag") << "tag:best" << QStringList{"exp-1", "Sweep 4"};
    QTest::newRow("tag any case") << "TAG:Best" << QStringList{"exp-1", "Sweep 4"};
    QTest::newRow("not tag") << "-tag:draft" << QStringList{"exp-1", "sweep-3"};
    QTest::newRow("two tags ANDed") << "tag:best tag:draft" << QStringList{"Sweep 4"};
    QTest::newRow("group") << "group:ablation" << QStringList{"exp-1", "sweep-3"};
    QTest::newRow("group any case, slash") << "GROUP:LR/Small" << QStringList{"exp-1"};
    QTest::newRow("not group") << "-group:ablation" << QStringList{"exp-2", "Sweep 4"};
    // A group's name is matched whole, never as a fragment, and a tag is no group.
    QTest::newRow("group whole name") << "group:abl" << QStringList{};
    QTest::newRow("tag is no group") << "group:best" << QStringList{};
    QTest::newRow("status") << "status:oom" << QStringList{"exp-2"};
    QTest::newRow("status any case") << "status:COMPLETE" << QStringList{"exp-1", "sweep-3"};
    QTest::newRow("not status") << "-status:complete" << QStringList{"exp-2", "Sweep 4"};
    QTest::newRow("name") << "name:exp" << QStringList{"exp-1", "exp-2"};
    QTest::newRow("name quoted") << "name:\"sweep 4\"" << QStringList{"Sweep 4"};
    QTest::newRow("param >") << "train.lr>1e-4" << QStringList{"exp-2", "sweep-3"};
    QTest::newRow("param >=") << "train.lr>=1e-4" << QStringList{"exp-1", "exp-2", "sweep-3"};
    QTest::newRow("param <") << "train.lr<1e-4" << QStringList{"Sweep 4"};
    QTest::newRow("param <=") << "train.lr<=0.0001" << QStringList{"exp-1", "Sweep 4"};
    QTest::newRow("param =") << "train.lr=3e-4" << QStringList{"exp-2"};
    QTest::newRow("param ==") << "train.lr==3e-4" << QStringList{"exp-2"};
    QTest::newRow("param !=") << "train.lr!=3e-4" << QStringList{"exp-1", "sweep-3", "Sweep 4"};
    QTest::newRow("param text =") << "shard.strategy=full_shard" << all;
    QTest::newRow("param text !=") << "shard.strategy!=NO_SHARD" << all;
    QTest::newRow("param. prefix") << "param.train.lr>1e-4" << QStringList{"exp-2", "sweep-3"};
    QTest::newRow("unknown key matches none") << "train.wd>0" << QStringList{};
    QTest::newRow("negated unknown key matches all") << "-train.wd>0" << all;
    QTest::newRow("last loss") << "loss<1.6" << QStringList{"exp-1"};
    QTest::newRow("last. prefix") << "last.loss<1.6" << QStringList{"exp-1"};
    QTest::newRow("best loss") << "best.loss<1.6" << QStringList{"exp-1", "sweep-3", "Sweep 4"};
    QTest::newRow("dotted metric") << "eval.loss<=2" << all;
    QTest::newRow("best dotted metric") << "best.eval.loss<1.95" << all;
    QTest::newRow("run without metric") << "-loss<100" << QStringList{"exp-2"};
    QTest::newRow("all together")
        << "tag:best -tag:draft status:complete train.lr<=1e-4 loss<1.6 exp"
        << QStringList{"exp-1"};
    QTest::newRow("negated word") << "-sweep" << QStringList{"exp-1", "exp-2"};
  }

  void matches() {
    QFETCH(QString, query);
    QFETCH(QStringList, names);
    QCOMPARE(kept(query, m_runs), names);
  }

  void errors_data() {
    QTest::addColumn<QString>("query");
    QTest::addColumn<int>("position");
    QTest::addColumn<QString>("message");
    QTest::newRow("unknown field")
        << "exp colour:red" << 4
        << "at 5, 'colour': unknown field: use tag:, group:, status: or name:";
    QTest::newRow("bad status") << "status:oomm" << 7 << "at 8, 'oomm': not a status: queued";
    QTest::newRow("double op") << "loss>>1" << 4 << "at 5, '>>': not a comparison";
    QTest::newRow("text with <") << "loss<low" << 5
                                 << "at 6, 'low': expected a number after '<' (loss<1e-4)";
    QTest::newRow("missing value")
        << "train.lr>" << 9 << "at the end of the query: expected a value right after '>'";
    QTest::newRow("missing value before space")
        << "tag: best" << 4 << "expected a value right after 'tag:'";
    QTest::newRow("spaced comparison") << "loss < 1.6" << 5
                                       << "at 6, '<': expected a parameter or metric name right "
                                          "before the comparison (no spaces: loss<1.6)";
    QTest::newRow("lone dash") << "exp - tag:x" << 4 << "at 5, '-': a '-' negates the term";
    QTest::newRow("open quote") << "name:\"abc" << 5 << "at 6, '\"': this quote is never closed";
    QTest::newRow("lone bang") << "loss!1" << 4 << "at 5, '!': expected a comparison";
    QTest::newRow("key with odd char") << "lo$s<1" << 2 << "at 3, '$': expected ':', a comparison";
  }

  void errors() {
    QFETCH(QString, query);
    QFETCH(int, position);
    QFETCH(QString, message);
    RunQueryError error;
    auto parsed = RunQuery::parse(query, &error);
    QVERIFY(!parsed);
    QCOMPARE(error.position, position);
    QVERIFY2(error.message.contains(message), qPrintable(error.message));
    QVERIFY2(QString::fromStdString(parsed.message()).startsWith("runs filter: "),
             parsed.message().c_str());
  }

  // Any input is bounded: an over-long query and too many terms are refused by name.
  void limits() {
    RunQueryError error;
    QVERIFY(!RunQuery::parse(QString(kMaxQueryChars + 1, 'a'), &error));
    QVERIFY2(error.message.contains("longer than"), qPrintable(error.message));
    QStringList many;
    for (int i = 0; i <= kMaxQueryTerms; ++i) many << "x";
    QVERIFY(!RunQuery::parse(many.join(' '), &error));
    QVERIFY2(error.message.contains("more than 64 terms"), qPrintable(error.message));
    many.removeLast();
    QVERIFY(RunQuery::parse(many.join(' ')));
  }

  void metricKeysAreWhatTheTermsRead() {
    auto query =
        RunQuery::parse("tag:x loss<1 best.eval.loss<2 param.train.lr>0 train.lr>0 loss>0");
    QVERIFY(query);
    QCOMPARE(query->metricKeys(), (QStringList{"loss", "eval.loss", "train.lr"}));
  }
};

QTEST_GUILESS_MAIN(TestRunQuery)
#include "tst_runquery.moc"
