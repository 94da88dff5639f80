// data/inspect: the data inspector's numbers on a crafted chat JSONL (a sample over data.seq_len,
// a line that is not JSON, an invalid sample, a missing image, an unreadable one, two images of
// known grids) against the expected ones; a sample's labels against the trainer's loader
// (load_prepared_sft) and its segments against the rendered chat; token rows (truncation,
// vocabulary); cancelling.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "data/inspect.h"
#include "data/text/sft_prepare.h"
#include "spec/experiment.h"
#include "tests/data/crafted_data.h"

using namespace shardscope;

class TestInspect : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  crafted::Files m_files;
  std::string m_train;
  std::string m_good;  // the loadable lines alone, for the trainer's loader

  std::string path(const std::string& name) const {
    return m_dir.filePath(QString::fromStdString(name)).toStdString();
  }
  void write(const std::string& name, const std::string& body) {
    std::ofstream(path(name), std::ios::binary) << body;
  }
  spec::Experiment experiment(std::int64_t seq_len, const std::string& extra = {}) {
    const std::string toml =
        "[model]\narch = \"qwen2_vl\"\npath = \"" + m_files.model +
        "\"\n[data]\nformat = \"chat\"\ntrain_path = \"" + m_train +
        "\"\nseq_len = " + std::to_string(seq_len) +
        "\nshuffle = false\n[train]\nbatch_size = 2\n[launch]\nnproc_per_node = 1\n" + extra;
    auto exp = spec::parse_experiment(toml, "inspect.toml");
    if (!exp) qFatal("%s", exp.message().c_str());
    return *exp;
  }
  data::DataInspector inspector(const spec::Experiment& exp) {
    auto i = data::DataInspector::open(exp);
    if (!i) qFatal("%s", i.message().c_str());
    return std::move(*i);
  }
  // The trainer's loader on the loadable lines: their prepared samples (no seq_len limit).
  std::vector<data::PreparedSample> trainerSamples() {
    auto prep = data::SftPreparer::open(m_files.model);
    if (!prep) qFatal("%s", prep.message().c_str());
    auto r = data::load_prepared_sft(m_good, *prep, 0, 0);
    if (!r) qFatal("%s", r.message().c_str());
    return *r;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(crafted::write(m_dir.path().toStdString(), m_files));
    m_train = m_files.train;
    m_good = m_files.good;
  }

  void numbersOfACraftedFile() {
    const auto samples = trainerSamples();  // lines 1, 2, 9, 7
    std::vector<std::int64_t> len;
    for (const auto& s : samples) len.push_back(static_cast<std::int64_t>(s.input_ids.size()));
    // data.seq_len holds every sample but line 7's.
    QCOMPARE(len.size(), std::size_t{4});
    const std::int64_t seq_len = std::max(len[0], std::max(len[1], len[2]));
    QVERIFY(len[3] > seq_len);
    const auto exp = experiment(seq_len);
    auto r = inspector(exp).inspect();
    QVERIFY2(r.ok(), r ? "" : r.message().c_str());
    QCOMPARE(r->files.size(), std::size_t{1});
    QVERIFY(r->packing);
    QCOMPARE(r->world, 1);
    const auto& f = r->files[0];
    QCOMPARE(f.role, std::string("train"));
    QCOMPARE(f.lines, std::int64_t{8});  // the blank line is not counted
    QCOMPARE(f.samples, std::int64_t{3});
    QCOMPARE(f.tokens, len[0] + len[1] + len[2] + len[3]);
    QCOMPARE(f.min_tokens, *std::min_element(len.begin(), len.end()));
    QCOMPARE(f.max_tokens, len[3]);
    QCOMPARE(f.loss_tokens, data::loss_tokens(samples[0]) + data::loss_tokens(samples[1]) +
                                data::loss_tokens(samples[2]));
    // Refused, by line, with the trainer's reason.
    QCOMPARE(f.refused, std::int64_t{4});
    QCOMPARE(f.refused_listed.size(), std::size_t{4});
    const std::vector<std::pair<std::int64_t, std::string>> refused = {{3, "malformed_json"},
                                                                       {4, "invalid_sample"},
                                                                       {5, "missing_image"},
                                                                       {6, "unreadable_image"}};
    for (std::size_t i = 0; i < refused.size(); ++i) {
      const auto& l = f.refused_listed[i];
      QCOMPARE(l.line, refused[i].first);
      QCOMPARE(l.kind, refused[i].second);
      const auto at = "train.jsonl:" + std::to_string(l.line) + ": ";
      QVERIFY2(l.reason.find(at) != std::string::npos, l.reason.c_str());
    }
    QVERIFY(f.refused_listed[0].reason.find("not a JSON object") != std::string::npos);
    QVERIFY(f.refused_listed[1].reason.find("messages: missing") != std::string::npos);
    QVERIFY(f.refused_listed[2].reason.find("missing.png: cannot open the image") !=
            std::string::npos);
    QVERIFY(f.refused_listed[3].reason.find("bad.png: not a PNG or JPEG") != std::string::npos);
    // Over data.seq_len: line 7, with its length and the trainer's message.
    QCOMPARE(f.over_seq_len, std::int64_t{1});
    QCOMPARE(f.over_listed[0].line, std::int64_t{7});
    QCOMPARE(f.over_listed[0].tokens, len[3]);
    QVERIFY(f.over_listed[0].reason.find("data.seq_len = " + std::to_string(seq_len)) !=
            std::string::npos);
    // The histogram holds the four tokenized lines, in bins of ceil((len[3] + 1) / 32).
    QCOMPARE(f.histogram.width, (len[3] + 1 + 31) / 32);
    std::int64_t counted = 0;
    for (auto c : f.histogram.counts) counted += c;
    QCOMPARE(counted, std::int64_t{4});
    QCOMPARE(f.histogram.counts[static_cast<std::size_t>(len[3] / f.histogram.width)] >= 1, true);
    // Images: img.png 24x16 -> a 4x6 grid of 4-pixel patches, 6 tokens after the 2x2 merge;
    // big.png 48x32 -> 8x12, 24 tokens.
    QCOMPARE(f.images, std::int64_t{2});
    QCOMPARE(f.visual_tokens, std::int64_t{30});
    QCOMPARE(f.images_per_sample.at(0), std::int64_t{2});
    QCOMPARE(f.images_per_sample.at(1), std::int64_t{2});
    QCOMPARE(f.largest_images.size(), std::size_t{2});
    QCOMPARE(f.largest_images[0].line, std::int64_t{9});
    QCOMPARE(f.largest_images[0].grid_h, std::int64_t{8});
    QCOMPARE(f.largest_images[0].grid_w, std::int64_t{12});
    QCOMPARE(f.largest_images[0].tokens, std::int64_t{24});
    QCOMPARE(f.largest_images[1].tokens, std::int64_t{6});
    QVERIFY(f.largest_images[1].path.find("img.png") != std::string::npos);
    // Packing, by hand: batch 2 on one rank, no shuffle, 3 samples: steps of samples (0, 1) and
    // (2, 0), each packed first-fit decreasing into rows of seq_len.
    auto rows = [&](std::int64_t a, std::int64_t b) { return a + b <= seq_len ? 1 : 2; };
    const double tokens = static_cast<double>(len[0] + len[1] + len[2] + len[0]);
    const double rowSlots =
        static_cast<double>((rows(len[0], len[1]) + rows(len[2], len[0])) * seq_len);
    QVERIFY(f.pack_efficiency.has_value());
    QCOMPARE(*f.pack_efficiency, tokens / rowSlots);
    QVERIFY(!f.cancelled);
    QCOMPARE(f.bytes_read, f.bytes_total);
  }

  // Line 2 as the trainer takes it: the labels of load_prepared_sft, byte for byte; the segments
  // spell the rendered chat, and the loss-carrying ones are the answer and its <|im_end|>.
  void sampleMatchesTheTrainer() {
    const auto samples = trainerSamples();
    const auto exp = experiment(1000);
    auto view = inspector(exp).sample(m_train, 2);
    QVERIFY2(view.ok(), view ? "" : view.message().c_str());
    QCOMPARE(view->input_ids, samples[1].input_ids);
    QCOMPARE(view->labels, samples[1].labels);
    QVERIFY(std::memcmp(view->labels.data(), samples[1].labels.data(),
                        view->labels.size() * sizeof(std::int64_t)) == 0);
    std::string spelled;
    std::string loss;
    for (const auto& s : view->segments) {
      spelled += s.text;
      if (s.loss) loss += s.text;
    }
    QCOMPARE(spelled, view->rendered);
    QCOMPARE(loss, std::string("abc<|im_end|>"));
    QCOMPARE(view->images.size(), std::size_t{1});
    QCOMPARE(view->images[0].tokens, std::int64_t{6});
    const auto image = std::find_if(view->segments.begin(), view->segments.end(),
                                    [](const data::SampleSegment& s) { return s.image == 0; });
    QVERIFY(image != view->segments.end());
    QCOMPARE(image->count, std::int64_t{6});
    QVERIFY(!image->loss);
    // JSON: the mask is the labels' != -100.
    const auto json = data::sample_to_json(*view);
    for (std::size_t t = 0; t < view->labels.size(); ++t)
      QCOMPARE(json["loss_mask"][t].get<int>(), view->labels[t] != -100 ? 1 : 0);
  }

  void refusedLineIsAnErrorNamingIt() {
    const auto exp = experiment(1000);
    const auto in = inspector(exp);
    for (std::int64_t line : {3, 5}) {
      auto view = in.sample(m_train, line);
      QVERIFY(!view.ok());
      QVERIFY2(
          view.message().find("train.jsonl:" + std::to_string(line) + ": ") != std::string::npos,
          view.message().c_str());
    }
    auto blank = in.sample(m_train, 8);
    QVERIFY(!blank.ok());
    QVERIFY2(blank.message().find("no such sample") != std::string::npos, blank.message().c_str());
  }

  void tinyModelWithChatDataIsRefused() {
    auto exp = experiment(100);
    exp.model.arch = "tiny";
    auto i = data::DataInspector::open(exp);
    QVERIFY(!i.ok());
    QVERIFY2(i.message().find("data.format = \"chat\"") != std::string::npos, i.message().c_str());
  }

  void cancelStopsAtOnce() {
    const auto exp = experiment(1000);
    std::atomic<bool> cancel{true};
    data::InspectOptions options;
    options.cancel = &cancel;
    auto r = inspector(exp).inspect(options);
    QVERIFY(r.ok());
    QVERIFY(r->cancelled);
    QCOMPARE(r->files[0].lines, std::int64_t{0});
  }

  // Token rows: a row longer than data.seq_len is listed (the trainer truncates it), an id
  // outside the tiny vocabulary refuses its line.
  void tokenRows() {
    write("tokens.jsonl",
          "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [1, 2, 3, 4, 5, 6]}\n"
          "{\"input_ids\": [1, 999]}\n");
    const std::string toml = "[data]\ntrain_path = \"" + path("tokens.jsonl") +
                             "\"\nseq_len = 4\n[train]\nbatch_size = 2\n";
    auto exp = spec::parse_experiment(toml, "tokens.toml");
    QVERIFY2(exp.ok(), exp ? "" : exp.message().c_str());
    auto r = inspector(*exp).inspect();
    QVERIFY(r.ok());
    const auto& f = r->files[0];
    QCOMPARE(f.samples, std::int64_t{2});
    QCOMPARE(f.refused, std::int64_t{1});
    QCOMPARE(f.refused_listed[0].line, std::int64_t{3});
    QVERIFY(f.refused_listed[0].reason.find("input_ids[1]: 999") != std::string::npos);
    QCOMPARE(f.over_seq_len, std::int64_t{1});
    QCOMPARE(f.over_listed[0].line, std::int64_t{2});
    QCOMPARE(f.loss_tokens, std::int64_t{2 + 3});  // positions 1.. of the rows cut to 4
    QVERIFY(!f.pack_efficiency.has_value());
    auto view = inspector(*exp).sample(path("tokens.jsonl"), 2);
    QVERIFY(view.ok());
    QCOMPARE(view->segments.size(), std::size_t{1});
    QCOMPARE(view->segments[0].text, std::string("1 2 3 4 5 6"));
  }
};

QTEST_GUILESS_MAIN(TestInspect)
#include "tst_inspect.moc"
