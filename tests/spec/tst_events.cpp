// Event protocol v1 is frozen: the golden lines below are what the trainer writes and what the
// backend reads. A change here is a protocol change and must bump kProtocolVersion.
#include <QFile>
#include <QTest>

#include <cmath>
#include <cstdio>

#include "spec/events.h"
#include "tests/support/paths.h"

using namespace shardscope::spec;

namespace {

QList<QByteArray> goldenLines() {
  QFile file(shardscope::testing::sourceDir() + "/tests/spec/golden/events-v1.jsonl");
  if (!file.open(QIODevice::ReadOnly))
    qFatal("cannot open the golden file %s", qPrintable(file.fileName()));
  QList<QByteArray> lines;
  for (const QByteArray& line : file.readAll().split('\n')) {
    if (!line.isEmpty()) lines << line;
  }
  return lines;
}

Event parseOrFail(const QByteArray& line, ParseMode mode = ParseMode::strict) {
  auto event = parse_event(line.toStdString(), mode);
  if (!event) qFatal("parse failed: %s", event.message().c_str());
  return std::move(event).value();
}

}  // namespace

class TestEvents : public QObject {
  Q_OBJECT

 private slots:
  void encodesEveryKindAsTheGoldenLine() {
    HelloEvent hello{
        2,          2,
        "9f2c",     {{"shardtrain", "0.1.0"}, {"torch", "2.13.0"}, {"backend", "gloo"}},
        2208985600, 18464768,
        6442450944};
    StepEvent step{1, 2.25, 1e-4, 1.5, 1024.5, 0.125, 4194304, 2097152};
    EvalEvent eval{10, {{"loss", 1.5}, {"accuracy", 0.75}}};
    MemEvent mem{10, 1073741824, 2147483648, 1610612736, 3221225472};
    CkptEvent ckpt{10, "ckpt/step-000010", "sharded"};
    LogEvent log{"info", "resumed from step 10"};
    DoneEvent done{DoneStatus::complete, {1.5}, false, 20};
    DoneEvent doneMulti{DoneStatus::stopped, {1.5, 0.75}, true, std::nullopt};
    ErrorEvent error{ErrorKind::peer_lost, "rank 0 is gone", "check rank-0.log"};
    StepEvent diverged{2, NAN, 1e-4, INFINITY, 0, 0, 0, 0};
    // A rank on a GPU: hello names the device and the FLOPs per token behind `mfu`; mem adds the
    // CUDA caching allocator's bytes.
    HelloEvent helloCuda{1,
                         1,
                         "9f2c",
                         {{"shardtrain", "0.1.0"}, {"torch", "2.11.0"}, {"backend", "local"}},
                         494032768,
                         494032768,
                         8589934592,
                         DeviceSummary{"cuda", 0, "NVIDIA H100 80GB HBM3", 85045870592, "9.0"},
                         3026454528.0,
                         0.875};
    MemEvent memCuda{10,         1073741824,  2147483648,  1610612736,
                     3221225472, 17179869184, 21474836480, 19327352832};
    // Every rank's phases of a step: they add up to its wall time.
    PhasesEvent phases{12, 0.5, 0.015625, 0.125, 0.1875, 0.0625, 0.09375, 0.25, 0, 0.015625};
    // A rank's process and host, then with its GPU (NVML's figures).
    SysEvent sys{12, 1.75, 536870912, 2.5, std::nullopt};
    SysEvent sysGpu{12, 1.0, 536870912, 0.5,
                    GpuSample{0.97, 1980, 650.5, 700, 61, 85899345920, 1048576, 2097152}};
    // A probe's answer with its reference and scores, then one without a reference.
    SampleEvent sample{
        10,
        "cat",
        "What animal is this?",
        {"probes/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.png"},
        "a black cat",
        3,
        "a cat",
        false,
        0.8,
        1.2};
    SampleEvent bare{10, "2", "Say hello.", {}, "hello", 1, {}, {}, {}, {}};
    // An oom with the allocator's view: the counting allocator's (CPU), then the caching
    // allocator's with the history snapshot trace.memory_on_oom wrote (CUDA).
    ErrorEvent oomCpu{ErrorKind::oom, "CPU out of memory", "lower train.micro_batch_size",
                      OomMemory{"cpu", 4194304, 3145728, 3670016, 6291456}};
    ErrorEvent oomCuda{
        ErrorKind::oom, "CUDA out of memory", "lower train.micro_batch_size",
        OomMemory{"cuda", 2147483648, 79456894976, 80530636800, std::nullopt, 81604378624,
                  1073741824, 85045870592, 524288000, "memory/rank-0.pickle"}};
    const std::vector<Event> events{
        {{1, 0, 0, 1732280000.125}, hello},    {{1, 0, 1, 1732280001.5}, step},
        {{1, 0, 2, 1732280002.0}, eval},       {{1, 1, 3, 1732280002.25}, mem},
        {{1, 0, 4, 1732280003.0}, ckpt},       {{1, 0, 5, 1732280003.5}, log},
        {{1, 0, 6, 1732280004.0}, done},       {{1, 0, 7, 1732280004.0}, doneMulti},
        {{1, 1, 8, 1732280005.0}, error},      {{1, 0, 9, 1732280006.0}, diverged},
        {{1, 0, 10, 1732280007.0}, helloCuda}, {{1, 0, 11, 1732280007.5}, memCuda},
        {{1, 1, 12, 1732280008.0}, phases},    {{1, 0, 13, 1732280008.5}, sys},
        {{1, 0, 14, 1732280009.0}, sysGpu},    {{1, 0, 15, 1732280009.5}, sample},
        {{1, 0, 16, 1732280010.0}, bare},      {{1, 1, 17, 1732280011.0}, oomCpu},
        {{1, 0, 18, 1732280011.5}, oomCuda}};
    const auto golden = goldenLines();
    QCOMPARE(golden.size(), static_cast<qsizetype>(events.size()));
    for (std::size_t i = 0; i < events.size(); ++i) {
      QCOMPARE(QByteArray::fromStdString(encode_event(events[i])),
               golden[static_cast<qsizetype>(i)]);
    }
  }

  void goldenLinesRoundTrip() {
    for (const QByteArray& line : goldenLines()) {
      Event event = parseOrFail(line);
      QCOMPARE(QByteArray::fromStdString(encode_event(event)), line);
    }
  }

  // hello.data_bound (chat data: what the estimate's rows were bounded by) reads and writes back.
  void helloCarriesTheDataBound() {
    const QByteArray line =
        R"({"v":1,"ev":"hello","rank":0,"seq":0,"t":1.0,"world_size":2,"local_world_size":2,"config_hash":"x","versions":{},"params":{"total":1,"trainable":1},"mem_estimate":4096,"data_bound":{"samples":16,"longest":69,"most_visual_tokens":36,"shortest_with_image":66}})";
    const Event event = parseOrFail(line);
    const auto& hello = std::get<HelloEvent>(event.body);
    QVERIFY(hello.data_bound.has_value());
    QCOMPARE(hello.data_bound->samples, std::int64_t{16});
    QCOMPARE(hello.data_bound->longest, std::int64_t{69});
    QCOMPARE(hello.data_bound->most_visual_tokens, std::int64_t{36});
    QCOMPARE(hello.data_bound->shortest_with_image, std::int64_t{66});
    QCOMPARE(QByteArray::fromStdString(encode_event(parseOrFail(line))), line);
  }

  void readsTypedFields() {
    const auto golden = goldenLines();
    auto hello = std::get<HelloEvent>(parseOrFail(golden[0]).body);
    QCOMPARE(hello.params_total, 2208985600LL);
    QCOMPARE(hello.versions.at("backend"), std::string("gloo"));
    auto step = std::get<StepEvent>(parseOrFail(golden[1]).body);
    QCOMPARE(step.reduce_scatter_bytes, 2097152LL);
    QCOMPARE(step.lr, 1e-4);
    auto multi = std::get<DoneEvent>(parseOrFail(golden[7]).body);
    QVERIFY(multi.objective_is_array);
    QCOMPARE(multi.objective.size(), std::size_t{2});
    QVERIFY(!multi.steps.has_value());
    auto diverged = std::get<StepEvent>(parseOrFail(golden[9]).body);
    QVERIFY(std::isnan(diverged.loss));
    auto err = std::get<ErrorEvent>(parseOrFail(golden[8]).body);
    QCOMPARE(err.kind, ErrorKind::peer_lost);
    QVERIFY(!hello.device.has_value());  // older trainers send no device
    auto helloCuda = std::get<HelloEvent>(parseOrFail(golden[10]).body);
    QVERIFY(helloCuda.device.has_value());
    QCOMPARE(helloCuda.device->name, std::string("NVIDIA H100 80GB HBM3"));
    QCOMPARE(helloCuda.device->capability, std::string("9.0"));
    QVERIFY(!hello.flops_per_token.has_value());  // older trainers send none
    QCOMPARE(*helloCuda.flops_per_token, 3026454528.0);
    QVERIFY(!hello.pack_efficiency.has_value());  // unpacked runs and older trainers
    QCOMPARE(*helloCuda.pack_efficiency, 0.875);
    auto mem = std::get<MemEvent>(parseOrFail(golden[3]).body);
    QVERIFY(!mem.cuda_peak.has_value());
    auto memCuda = std::get<MemEvent>(parseOrFail(golden[11]).body);
    QCOMPARE(*memCuda.cuda_peak, 19327352832LL);
    auto phases = std::get<PhasesEvent>(parseOrFail(golden[12]).body);
    QCOMPARE(phases.step, 12LL);
    QCOMPARE(phases.comm_total, 0.25);
    QCOMPARE(phases.data + phases.forward + phases.backward + phases.optimizer +
                 phases.comm_exposed + phases.copy + phases.other,
             phases.wall);
    auto sys = std::get<SysEvent>(parseOrFail(golden[13]).body);
    QVERIFY(!sys.gpu.has_value());  // a CPU rank
    QCOMPARE(sys.cpu, 1.75);
    auto sysGpu = std::get<SysEvent>(parseOrFail(golden[14]).body);
    QCOMPARE(*sysGpu.gpu->power_w, 650.5);
    QCOMPARE(*sysGpu.gpu->mem_used, 85899345920LL);
    // A GPU whose NVML lacks a counter leaves it out; the others stay.
    auto partial = std::get<SysEvent>(
        parseOrFail(
            R"({"v":1,"ev":"sys","rank":0,"seq":0,"t":1,"step":1,"cpu":1,"rss":1,"load1":0,"gpu":{"util":0.5}})")
            .body);
    QCOMPARE(*partial.gpu->util, 0.5);
    QVERIFY(!partial.gpu->power_w.has_value());
    auto sample = std::get<SampleEvent>(parseOrFail(golden[15]).body);
    QCOMPARE(sample.probe, std::string("cat"));
    QCOMPARE(sample.images.size(), std::size_t{1});
    QCOMPARE(*sample.exact_match, false);
    QCOMPARE(*sample.f1, 0.8);
    QCOMPARE(*sample.reference, std::string("a cat"));
    auto bare = std::get<SampleEvent>(parseOrFail(golden[16]).body);
    QVERIFY(!bare.reference.has_value());  // no reference: no scores
    QVERIFY(!bare.exact_match.has_value() && !bare.cer.has_value());
    QVERIFY(!err.memory.has_value());  // not an oom, and older trainers: no allocator view
    auto oomCpu = std::get<ErrorEvent>(parseOrFail(golden[17]).body);
    QCOMPARE(oomCpu.memory->device, std::string("cpu"));
    QCOMPARE(*oomCpu.memory->limit, 6291456LL);
    QVERIFY(!oomCpu.memory->largest_free.has_value() && !oomCpu.memory->snapshot.has_value());
    auto oomCuda = std::get<ErrorEvent>(parseOrFail(golden[18]).body);
    QCOMPARE(*oomCuda.memory->largest_free, 1073741824LL);
    QCOMPARE(*oomCuda.memory->snapshot, std::string("memory/rank-0.pickle"));
    QVERIFY(!oomCuda.memory->limit.has_value());
  }

  void errorsNameTheField_data() {
    QTest::addColumn<QByteArray>("line");
    QTest::addColumn<QString>("expected");
    QTest::newRow("not json") << QByteArray("loss=3") << "not a JSON object";
    QTest::newRow("array") << QByteArray("[1,2]") << "expected a JSON object";
    QTest::newRow("no ev") << QByteArray(R"({"v":1})") << "ev: missing";
    QTest::newRow("unknown kind") << QByteArray(R"({"v":1,"ev":"bogus","rank":0,"seq":0,"t":1})")
                                  << "unknown event kind \"bogus\"";
    QTest::newRow("newer protocol")
        << QByteArray(R"({"v":2,"ev":"log","rank":0,"seq":0,"t":1,"level":"info","message":"x"})")
        << "log.v: protocol v2 is not v1";
    QTest::newRow("missing seq")
        << QByteArray(R"({"v":1,"ev":"log","rank":0,"t":1,"level":"info","message":"x"})")
        << "log.seq: is missing";
    QTest::newRow("phases without forward")
        << QByteArray(
               R"({"v":1,"ev":"phases","rank":0,"seq":0,"t":1,"step":1,"wall":1,"data":0,"backward":0,"optimizer":0,"comm_exposed":0,"comm_total":0,"copy":0,"other":0})")
        << "phases.forward: is missing";
    QTest::newRow("sample with a numeric exact_match")
        << QByteArray(
               R"({"v":1,"ev":"sample","rank":0,"seq":0,"t":1,"step":1,"probe":"a","text":"x","tokens":1,"exact_match":1})")
        << "sample.exact_match: expected true or false, got 1";
    QTest::newRow("string loss")
        << QByteArray(
               R"({"v":1,"ev":"step","rank":0,"seq":0,"t":1,"step":1,"loss":"abc","lr":1,"grad_norm":1,"tokens_per_s":1,"mfu":0,"comm_bytes":{"all_gather":0,"reduce_scatter":0}})")
        << "step.loss: expected a number, got \"abc\"";
    QTest::newRow("nested")
        << QByteArray(
               R"({"v":1,"ev":"step","rank":0,"seq":0,"t":1,"step":1,"loss":1,"lr":1,"grad_norm":1,"tokens_per_s":1,"mfu":0,"comm_bytes":{"all_gather":1.5,"reduce_scatter":0}})")
        << "step.comm_bytes.all_gather: expected an integer, got 1.5";
    QTest::newRow("negative flops")
        << QByteArray(
               R"({"v":1,"ev":"hello","rank":0,"seq":0,"t":1,"world_size":1,"local_world_size":1,"config_hash":"x","versions":{},"params":{"total":1,"trainable":1},"mem_estimate":0,"flops_per_token":-5})")
        << "hello.flops_per_token: expected a positive number, got -5";
    QTest::newRow("pack efficiency above 1")
        << QByteArray(
               R"({"v":1,"ev":"hello","rank":0,"seq":0,"t":1,"world_size":1,"local_world_size":1,"config_hash":"x","versions":{},"params":{"total":1,"trainable":1},"mem_estimate":0,"pack_efficiency":1.5})")
        << "hello.pack_efficiency: expected a number in (0, 1], got 1.5";
    QTest::newRow("data bound longer than its longest")
        << QByteArray(
               R"({"v":1,"ev":"hello","rank":0,"seq":0,"t":1,"world_size":1,"local_world_size":1,"config_hash":"x","versions":{},"params":{"total":1,"trainable":1},"mem_estimate":0,"data_bound":{"samples":2,"longest":10,"most_visual_tokens":11,"shortest_with_image":5}})")
        << "hello.data_bound.longest: expected token counts from 0 with none above the longest "
           "sample's";
    QTest::newRow("data bound of 1e300 samples")
        << QByteArray(
               R"({"v":1,"ev":"hello","rank":0,"seq":0,"t":1,"world_size":1,"local_world_size":1,"config_hash":"x","versions":{},"params":{"total":1,"trainable":1},"mem_estimate":0,"data_bound":{"samples":1e300,"longest":10,"most_visual_tokens":1,"shortest_with_image":5}})")
        << "hello.data_bound.samples: expected an integer, got 1e+300";
    QTest::newRow("bad done status")
        << QByteArray(R"({"v":1,"ev":"done","rank":0,"seq":0,"t":1,"status":"ok"})")
        << "done.status: expected complete, stopped or failed";
    QTest::newRow("bad error kind")
        << QByteArray(R"({"v":1,"ev":"error","rank":0,"seq":0,"t":1,"kind":"boom","message":"m"})")
        << "error.kind: expected oom, peer_lost, config, data, io, disk_full or internal, got "
           "\"boom\"";
    QTest::newRow("oom memory with a huge request")
        << QByteArray(
               R"({"v":1,"ev":"error","rank":0,"seq":0,"t":1,"kind":"oom","message":"m","memory":{"device":"cpu","request":1e300,"allocated":0,"peak":0}})")
        << "error.memory.request: expected an integer, got 1e+300";
    QTest::newRow("oom memory on a tpu")
        << QByteArray(
               R"({"v":1,"ev":"error","rank":0,"seq":0,"t":1,"kind":"oom","message":"m","memory":{"device":"tpu","request":1,"allocated":0,"peak":0}})")
        << "error.memory.device: expected \"cpu\" or \"cuda\", got \"tpu\"";
    QTest::newRow("oom memory negative")
        << QByteArray(
               R"({"v":1,"ev":"error","rank":0,"seq":0,"t":1,"kind":"oom","message":"m","memory":{"device":"cpu","request":-1,"allocated":0,"peak":0}})")
        << "error.memory.request: expected bytes >= 0, got -1";
    QTest::newRow("bad ckpt kind")
        << QByteArray(
               R"({"v":1,"ev":"ckpt","rank":0,"seq":0,"t":1,"step":1,"path":"p","kind":"zip"})")
        << "ckpt.kind: expected sharded, full or adapter";
    // Found by fuzz_events: an integer field written as a float beyond int64 was converted
    // anyway (undefined behaviour), and an int field above 2^32 wrapped ("v": 2^32 + 1 read as 1).
    QTest::newRow("integer beyond int64 as float")
        << QByteArray(R"({"v":1,"ev":"log","rank":0,"seq":4.9e19,"t":1,"level":"i","message":"m"})")
        << "log.seq: expected an integer, got 4.9e+19";
    QTest::newRow("integer beyond int64")
        << QByteArray(
               R"({"v":1,"ev":"log","rank":0,"seq":18446744073709551615,"t":1,"level":"i","message":"m"})")
        << "log.seq: expected an integer below 2^63";
    QTest::newRow("version wraps to 1")
        << QByteArray(
               R"({"v":4294967297,"ev":"log","rank":0,"seq":0,"t":1,"level":"i","message":"m"})")
        << "log.v: expected a 32-bit integer, got 4294967297";
    QTest::newRow("rank beyond int")
        << QByteArray(
               R"({"v":1,"ev":"log","rank":-4294967296,"seq":0,"t":1,"level":"i","message":"m"})")
        << "log.rank: expected a 32-bit integer";
  }
  void errorsNameTheField() {
    QFETCH(QByteArray, line);
    QFETCH(QString, expected);
    auto event = parse_event(line.toStdString());
    QVERIFY(!event.ok());
    QVERIFY2(QString::fromStdString(event.message()).contains(expected), event.message().c_str());
  }

  void deepOrLongValuesGiveShortErrors() {
    // A line of 200,000 nested arrays (what a broken program can print) made the error message
    // dump the value, recursing once per level until the stack overflowed; a 1 MB string went
    // whole into the message. Containers are named by type and scalars cut at 80 bytes.
    const std::string deep = std::string(200000, '[') + std::string(200000, ']');
    auto array = parse_event(deep);
    QVERIFY(!array.ok());
    QCOMPARE(array.message(), std::string("expected a JSON object, got an array"));
    auto field = parse_event(R"({"v":1,"ev":"log","rank":0,"seq":0,"t":1,"level":)" + deep + "}");
    QVERIFY(!field.ok());
    QCOMPARE(field.message(), std::string("log.level: expected a string, got an array"));
    auto big =
        parse_event(R"({"v":1,"ev":"log","rank":0,"seq":"x)" + std::string(1 << 20, 'y') + R"("})");
    QVERIFY(!big.ok());
    QVERIFY2(big.message().size() < 200, big.message().substr(0, 200).c_str());
  }

  void lenientLinesTakeDefaults() {
    // A program used as a search trial may print just {"ev":"done","status":...,"objective":...}.
    auto strict = parse_event(R"({"ev":"done","status":"complete","objective":0.5})");
    QVERIFY(!strict.ok());
    auto event =
        parse_event(R"({"ev":"done","status":"complete","objective":0.5})", ParseMode::lenient);
    QVERIFY2(event.ok(), event.ok() ? "" : event.message().c_str());
    QCOMPARE(event->env.v, 1);
    QCOMPARE(event->env.rank, 0);
    QCOMPARE(event->env.seq, -1LL);
    QVERIFY(std::isnan(event->env.t));
    QCOMPARE(std::get<DoneEvent>(event->body).objective, std::vector<double>{0.5});
  }

  void writerNumbersAndFlushesLines() {
    std::FILE* file = std::tmpfile();
    QVERIFY(file);
    EventWriter writer(3, file);
    writer.write(LogEvent{"info", "a"});
    writer.write(DoneEvent{DoneStatus::complete, {}, false, 5});
    QCOMPARE(writer.next_seq(), 2LL);
    std::rewind(file);
    char buffer[512];
    for (int seq = 0; seq < 2; ++seq) {
      QVERIFY(std::fgets(buffer, sizeof buffer, file));
      Event event = parseOrFail(QByteArray(buffer));
      QCOMPARE(event.env.rank, 3);
      QCOMPARE(event.env.seq, static_cast<std::int64_t>(seq));
      QVERIFY(std::abs(event.env.t - unix_time_now()) < 60);
    }
    std::fclose(file);
  }
};

QTEST_APPLESS_MAIN(TestEvents)
#include "tst_events.moc"
