// The monitor's parser on real protocol lines: partial lines wait for their newline, malformed
// lines become log lines and anomalies, seq gaps and repeats are recorded, metrics come out.
#include <QTest>

#include <cmath>

#include "backend/monitor/eventstream.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

QByteArray line(int rank, qint64 seq, const spec::Payload& body) {
  return QByteArray::fromStdString(spec::encode_event({{1, rank, seq, 1.7e9}, body})) + "\n";
}

QByteArray stepLine(qint64 seq, qint64 step) {
  return line(0, seq, spec::StepEvent{step, 1.5, 1e-3, 0.5, 100, 0.1, 8, 16});
}

}  // namespace

class TestEventStream : public QObject {
  Q_OBJECT

 private slots:
  // A line whose time is null (a program trial writing None) used to reach the store as a NaN
  // time, which `time REAL NOT NULL` refused, so the monitor read the same chunk forever and the
  // sweep never ended. Its metrics now carry the time the line was read. (A bare NaN, as Python's
  // json.dumps writes float('nan'), is no JSON: that line is kept as a malformed log line.)
  void nullTimeIsStampedOnRead() {
    EventStream stream;
    const QByteArray nullTime =
        R"({"v":1,"ev":"eval","rank":0,"seq":0,"t":null,"step":3,"metrics":{"loss":0.5}})"
        "\n";
    const QByteArray nanTime =
        R"({"v":1,"ev":"eval","rank":0,"seq":1,"t":NaN,"step":4,"metrics":{"loss":0.25}})"
        "\n";
    const double before = spec::unix_time_now();
    FileChunk chunk = parseEventsChunk(7, nullTime + nanTime + stepLine(2, 5), stream);
    QCOMPARE(chunk.endOffset, qint64(nullTime.size() + nanTime.size() + stepLine(2, 5).size()));
    QCOMPARE(chunk.events.size(), std::size_t(2));  // the NaN line is a malformed log line
    QCOMPARE(chunk.logs.size(), std::size_t(1));
    QVERIFY(!chunk.metrics.empty());
    for (const MetricRow& m : chunk.metrics) {
      QVERIFY2(std::isfinite(m.time), qPrintable(m.key));
      if (m.key == QLatin1String("eval.loss")) QVERIFY(m.time >= before);
    }
    int stamped = 0;
    for (const Anomaly& a : chunk.anomalies) stamped += a.detail.startsWith("t: null") ? 1 : 0;
    QCOMPARE(stamped, 1);
  }

  void partialLineWaitsForNewline() {
    EventStream stream;
    const QByteArray whole = stepLine(0, 1);
    FileChunk first = parseEventsChunk(7, whole.left(20), stream);
    QCOMPARE(first.endOffset, 0);  // nothing consumed
    QVERIFY(first.events.empty() && first.logs.empty());
    QCOMPARE(stream.eventsOffset, 0);
    // The next read starts again at the stored offset and now sees the whole line.
    FileChunk second = parseEventsChunk(7, whole + stepLine(1, 2).left(5), stream);
    QCOMPARE(second.startOffset, 0);
    QCOMPARE(second.endOffset, whole.size());
    QCOMPARE(second.events.size(), std::size_t(1));
    QCOMPARE(second.events[0].json + "\n", whole);
    QCOMPARE(stream.eventsOffset, whole.size());
  }

  void malformedLinesAreKeptAndCounted() {
    EventStream stream;
    const QByteArray good = stepLine(0, 1);
    const QByteArray bytes = good + "Traceback: not json\n" + "{\"v\":1,\"ev\":\"step\"}\n";
    FileChunk chunk = parseEventsChunk(7, bytes, stream);
    QCOMPARE(chunk.events.size(), std::size_t(1));
    QCOMPARE(chunk.logs.size(), std::size_t(2));
    QCOMPARE(chunk.logs[0].text, "Traceback: not json");
    QCOMPARE(chunk.logs[0].offset, good.size());
    QCOMPARE(chunk.logs[0].file, RankFile::events);
    QCOMPARE(stream.malformed, 2);
    QCOMPARE(chunk.anomalies.size(), std::size_t(2));
    QCOMPARE(chunk.anomalies[1].kind, Anomaly::Kind::malformed);
    QVERIFY2(chunk.anomalies[1].detail.contains("rank"), qPrintable(chunk.anomalies[1].detail));
    QCOMPARE(chunk.endOffset, bytes.size());
  }

  void seqGapsAndRepeatsAreRecorded() {
    EventStream stream;
    const QByteArray bytes =
        stepLine(0, 1) + stepLine(1, 2) + stepLine(3, 3) + stepLine(3, 4) + stepLine(4, 5);
    FileChunk chunk = parseEventsChunk(7, bytes, stream);
    QCOMPARE(chunk.events.size(), std::size_t(5));  // every line is stored, anomalies or not
    QCOMPARE(chunk.anomalies.size(), std::size_t(2));
    QCOMPARE(chunk.anomalies[0].kind, Anomaly::Kind::gap);
    QCOMPARE(chunk.anomalies[0].seq, 3);
    QVERIFY(chunk.anomalies[0].detail.contains("1 events missing"));
    QCOMPARE(chunk.anomalies[1].kind, Anomaly::Kind::repeat);
    QCOMPARE(chunk.anomalies[1].seq, 3);
    QCOMPARE(stream.lastSeq, 4);
    // Across chunks: the stream remembers the last seq.
    FileChunk next = parseEventsChunk(7, stepLine(6, 6), stream);
    QCOMPARE(next.anomalies.size(), std::size_t(1));
    QCOMPARE(next.anomalies[0].kind, Anomaly::Kind::gap);
  }

  void statusEventsAndMetrics() {
    EventStream stream;
    stream.rank = 1;
    const QByteArray bytes =
        line(1, 0, spec::HelloEvent{2, 2, "h", {}, 10, 1, 100}) +
        line(1, 1, spec::MemEvent{1, 10, 20, 30, 40}) +
        line(1, 2, spec::EvalEvent{1, {{"loss", 0.5}, {"accuracy", 0.75}}}) +
        line(1, 3, spec::ErrorEvent{spec::ErrorKind::oom, "out of memory", "smaller batch"}) +
        line(1, 4, spec::DoneEvent{spec::DoneStatus::failed, {}, false, std::nullopt});
    FileChunk chunk = parseEventsChunk(7, bytes, stream);
    QVERIFY(stream.hello);
    QVERIFY(stream.lastError && stream.lastError->kind == spec::ErrorKind::oom);
    QVERIFY(stream.done && stream.done->status == spec::DoneStatus::failed);
    QCOMPARE(chunk.metrics.size(), std::size_t(6));  // 4 mem + 2 eval
    QCOMPARE(chunk.metrics[3].key, "mem.rss");
    QCOMPARE(chunk.metrics[3].value, 40.0);
    QCOMPARE(chunk.metrics[3].rank, 1);
    QCOMPARE(chunk.metrics[4].key, "eval.accuracy");
  }

  // Every rank's phases become per-rank metrics `phase.*` (the Plots panel's and `why`'s input).
  void phasesBecomeMetricsOfTheirRank() {
    EventStream stream;
    stream.rank = 1;
    const QByteArray bytes = line(
        1, 0,
        spec::PhasesEvent{3, 0.5, 0.015625, 0.125, 0.1875, 0.0625, 0.09375, 0.25, 0, 0.015625});
    FileChunk chunk = parseEventsChunk(0, bytes, stream);
    QCOMPARE(chunk.metrics.size(), std::size_t(9));
    QStringList keys;
    for (const auto& m : chunk.metrics) {
      keys << m.key;
      QCOMPARE(m.rank, 1);
      QCOMPARE(m.step, 3);
    }
    QCOMPARE(keys, QStringList({"phase.wall", "phase.data", "phase.forward", "phase.backward",
                                "phase.optimizer", "phase.comm_exposed", "phase.comm_total",
                                "phase.copy", "phase.other"}));
    QCOMPARE(chunk.metrics[5].value, 0.09375);
    QCOMPARE(chunk.metrics[6].value, 0.25);
  }

  // `sys` samples become `sys.*` metrics of their rank; a GPU counter NVML lacks is no row.
  void sysSamplesBecomeMetrics() {
    EventStream stream;
    stream.rank = 2;
    spec::GpuSample gpu;
    gpu.util = 0.5;
    gpu.power_w = 300;
    const QByteArray bytes = line(2, 0, spec::SysEvent{4, 1.5, 1024, 0.25, std::nullopt}) +
                             line(2, 1, spec::SysEvent{5, 1.0, 2048, 0.5, gpu});
    FileChunk chunk = parseEventsChunk(0, bytes, stream);
    QStringList keys;
    for (const auto& m : chunk.metrics) keys << m.key + "@" + QString::number(m.step);
    QCOMPARE(keys, QStringList({"sys.cpu@4", "sys.rss@4", "sys.load1@4", "sys.cpu@5", "sys.rss@5",
                                "sys.load1@5", "sys.gpu_util@5", "sys.power_w@5"}));
    QCOMPARE(chunk.metrics.back().value, 300.0);
    QCOMPARE(chunk.metrics.back().rank, 2);
  }

  void logLinesKeepLastWords() {
    EventStream stream;
    QByteArray bytes;
    for (int i = 0; i < 15; ++i) bytes += "line " + QByteArray::number(i) + "\n";
    FileChunk chunk = parseLogChunk(7, bytes + "partial", stream);
    QCOMPARE(chunk.logs.size(), std::size_t(15));
    QCOMPARE(chunk.endOffset, bytes.size());
    QCOMPARE(stream.lastLogLines.size(), kLastWordsLines);
    QCOMPARE(stream.lastLogLines.last(), "line 14");
  }
};

QTEST_GUILESS_MAIN(TestEventStream)
#include "tst_eventstream.moc"
