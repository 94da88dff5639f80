// Population-based training through shardscope-cli: `sweep` of a [search.pbt] experiment (2
// members of 2-rank tiny-model trials, 2 segments of 3 steps), `study show --json`'s lineage and
// best schedule, and `pbt-replay`, which runs that schedule as one run: attempt 0 trains steps 1-3
// with the first segment's values, attempt 1 resumes its step-3 checkpoint with the second's and
// trains steps 4-6. Its loss curve is, exactly, the best member's chain of segments' (the same
// seeds, data order, values and world size; fp32 on CPU). Cost: 6 trainer starts of 3 steps.
#include <QFile>
#include <QJsonArray>
#include <QRegularExpression>
#include <QTest>

#include <map>

#include "backend/store/runstore.h"
#include "tests/app/clirunlog.h"
#include "tests/app/clitest.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;

namespace {

const char* kTinyPbt = R"([experiment]
name = "demo"  # the demo: `sweep` writes its data on first use
[model]
arch = "tiny"
tiny_vocab_size = 256
tiny_hidden_size = 32
tiny_layers = 2
tiny_heads = 4
[data]
train_path = "demo-data/train.jsonl"
eval_path = "demo-data/train.jsonl"
format = "tokens"
seq_len = 32
[train]
max_steps = 6
batch_size = 8
ckpt_at_end = false
[eval]
every = 3
batches = 1
[launch]
nproc_per_node = 2
threads_per_rank = 1
[search]
name = "pbt"
seed = 3
objectives = {"eval.loss" = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-3
high = 3e-1
log = true
[search.pbt]
population = 2
interval_steps = 3
quantile = 0.5
mutable = ["train.lr"]
)";

std::map<qint64, double> lossOf(backend::RunReader& reader, qint64 runId) {
  std::map<qint64, double> out;
  if (auto points = reader.metric(runId, QStringLiteral("loss"))) {
    for (const auto& p : *points) out[p.step] = p.value;
  }
  return out;
}

}  // namespace

class TestCliPbt : public QObject, clitest::OnRunLog {
  Q_OBJECT

 private slots:
  void initTestCase() { QVERIFY(openRunLog()); }

  void sweepShowsTheLineageAndReplaysTheBestSchedule() {
    const QString exp = m_dir.filePath("tiny-pbt.toml");
    {
      QFile file(exp);
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write(kTinyPbt);
    }
    const auto sweep = cli({"sweep", exp});
    QVERIFY2(sweep.exitCode == 0, qPrintable(sweep.out + sweep.err));
    QVERIFY2(sweep.out.contains("population-based training, 2 members, 2 segments of 3 steps"),
             qPrintable(sweep.out));
    QVERIFY2(sweep.out.contains(QRegularExpression("segment 1 member \\d start from member \\d")),
             qPrintable(sweep.out));

    const auto show = cli({"--json", "study", "show", "pbt"});
    QVERIFY2(show.exitCode == 0, qPrintable(show.err));
    const QJsonObject pbt = clitest::json(show.out).value("pbt").toObject();
    QCOMPARE(pbt.value("segments").toArray().size(), 4);
    const QJsonArray schedule = pbt.value("best_schedule").toArray();
    QCOMPARE(schedule.size(), 2);
    const auto text = cli({"study", "show", "pbt"});
    QVERIFY2(text.out.contains(QRegularExpression("exploits member \\d \\(run \\d+\\) at step 3")),
             qPrintable(text.out));
    // What applies to PBT instead of the unused sampler and trial budget.
    QVERIFY2(text.out.contains("search:     population-based training: 2 members, segments of 3 "
                               "steps\ntrials:     4 segment runs ("),
             qPrintable(text.out));
    QVERIFY2(!text.out.contains("sampler:"), qPrintable(text.out));

    const auto replay = cli({"pbt-replay", "pbt"});
    QVERIFY2(replay.exitCode == 0, qPrintable(replay.out + replay.err));
    const auto id =
        QRegularExpression("pbt-replay: run \\S+ \\(id (\\d+)\\) complete").match(replay.out);
    QVERIFY2(id.hasMatch(), qPrintable(replay.out));
    const qint64 runId = id.captured(1).toLongLong();

    auto store = backend::RunStore::open(m_db);
    VERIFY_OK(store);
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto run = reader->run(runId);
    VERIFY_OK(run);
    QVERIFY(run->has_value());
    QCOMPARE((**run).status, spec::RunStatus::complete);
    QCOMPARE((**run).attempt, 1);
    QVERIFY(!(**run).studyId);
    // The last attempt's values are the last segment's.
    const QJsonObject last = schedule.last().toObject();
    QCOMPARE((**run).params.value("train.lr").toDouble(),
             last.value("params").toObject().value("train.lr").toDouble());
    // One curve, steps 1-6, the chain's losses exactly.
    const auto replayed = lossOf(*reader, runId);
    QCOMPARE(int(replayed.size()), 6);
    for (const auto& v : schedule) {
      const QJsonObject s = v.toObject();
      const auto original = lossOf(*reader, s.value("run").toInteger());
      for (qint64 step = s.value("start_step").toInteger() + 1;
           step <= s.value("end_step").toInteger(); ++step) {
        QVERIFY2(original.count(step) == 1 && replayed.count(step) == 1,
                 qPrintable(QString::number(step)));
        QCOMPARE(replayed.at(step), original.at(step));
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestCliPbt)
#include "tst_cli_pbt.moc"
