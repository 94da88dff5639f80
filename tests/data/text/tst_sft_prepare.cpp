// data/text/sft_prepare: SFT JSONL lines to ids, labels and image patches with a model
// folder's tokenizer.json and preprocessor_config.json. The reference test
// (tests/trainer/models/reference_forward.py) checks the numbers against transformers; this one
// checks the shapes and that every bad input names its file:line and the fix.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "data/image/image.h"
#include "data/text/sft_prepare.h"
#include "tests/data/text/tiny_tokenizer.h"

using namespace shardscope;

namespace {

constexpr std::int64_t kImagePad = 305;  // tiny_tokenizer.h

const char* kImageSample =
    R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "img.png"},)"
    R"( {"type": "text", "text": "hello"}]}, {"role": "assistant", "content": "abc"}]})";
const char* kTextSample =
    R"({"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "bc"}]})";

}  // namespace

class TestSftPrepare : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;

  std::string path(const char* name) const { return m_dir.filePath(name).toStdString(); }
  std::string write(const char* name, const std::string& body) {
    std::ofstream(path(name), std::ios::binary) << body;
    return path(name);
  }
  // A model folder: the tiny tokenizer, and an image processor with 4-pixel patches.
  std::string model_dir(const char* name, bool image_config) {
    std::filesystem::create_directories(path(name));
    std::ofstream(path(name) + "/tokenizer.json") << tiny::document().dump();
    if (image_config) {
      nlohmann::json cfg = {{"min_pixels", 64},
                            {"max_pixels", 4096},
                            {"patch_size", 4},
                            {"temporal_patch_size", 2},
                            {"merge_size", 2}};
      std::ofstream(path(name) + "/preprocessor_config.json") << cfg.dump();
    }
    return path(name);
  }
  data::SftPreparer open(const std::string& dir) {
    auto p = data::SftPreparer::open(dir);
    if (!p) qFatal("%s", p.message().c_str());
    return std::move(p).value();
  }
  std::string load_error(const std::string& jsonl, const data::SftPreparer& prep,
                         std::int64_t max_tokens = 0, std::int64_t vocab = 0) {
    auto r = data::load_prepared_sft(jsonl, prep, max_tokens, vocab);
    return r ? std::string() : r.message();
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    data::RgbImage img{24, 16, std::vector<std::uint8_t>(24 * 16 * 3, 90)};
    QVERIFY(data::write_png(path("img.png"), img).ok());
  }

  void imageSampleExpandsPadTokens() {
    const auto prep = open(model_dir("vl", true));
    auto r = data::load_prepared_sft(
        write("ok.jsonl", std::string(kImageSample) + "\n" + kTextSample + "\n"), prep, 0, 0);
    QVERIFY2(r.ok(), r ? "" : r.message().c_str());
    QCOMPARE(r->size(), std::size_t{2});
    const auto& s = (*r)[0];
    QCOMPARE(s.images.size(), std::size_t{1});
    QCOMPARE(s.images[0].grid_h, std::int64_t{4});  // 16 / 4
    QCOMPARE(s.images[0].grid_w, std::int64_t{6});  // 24 / 4
    QCOMPARE(s.images[0].pixel_values.size(), std::size_t{24 * 3 * 2 * 4 * 4});
    const auto pads = std::count(s.input_ids.begin(), s.input_ids.end(), kImagePad);
    QCOMPARE(pads, std::ptrdiff_t{6});  // 4 * 6 / merge^2
    QCOMPARE(s.input_ids.size(), s.labels.size());
    for (std::size_t t = 0; t < s.input_ids.size(); ++t)
      if (s.input_ids[t] == kImagePad) QCOMPARE(s.labels[t], std::int64_t{-100});
    QVERIFY(data::loss_tokens(s) > 0);
    QCOMPARE(s.where.line, std::int64_t{1});
    QVERIFY((*r)[1].images.empty());
    QCOMPARE((*r)[1].where.line, std::int64_t{2});
  }

  // data.seq_len bounds each sample (images expanded): the longer second line is refused.
  void tooLongSampleNamesItsLine() {
    const auto prep = open(model_dir("vl", true));
    const auto file = write("long.jsonl", std::string(kTextSample) + "\n" + kImageSample + "\n");
    auto all = data::load_prepared_sft(file, prep, 0, 0);
    QVERIFY(all.ok());
    const auto fits = static_cast<std::int64_t>((*all)[0].input_ids.size());
    QVERIFY(static_cast<std::int64_t>((*all)[1].input_ids.size()) > fits);
    QVERIFY(data::load_prepared_sft(file, prep,
                                    static_cast<std::int64_t>((*all)[1].input_ids.size()), 0)
                .ok());
    const auto err = load_error(file, prep, fits);
    QVERIFY2(err.find("long.jsonl:2:") != std::string::npos, err.c_str());
    QVERIFY2(err.find("data.seq_len = " + std::to_string(fits)) != std::string::npos, err.c_str());
  }

  void idsOutsideTheVocabularyAreRefused() {
    const auto prep = open(model_dir("vl", true));
    const auto err = load_error(write("vocab.jsonl", kTextSample), prep, 0, 300);
    QVERIFY2(err.find("vocab.jsonl:1:") != std::string::npos, err.c_str());
    QVERIFY2(err.find("outside the model's vocabulary (300)") != std::string::npos, err.c_str());
  }

  void imagesNeedAnImageProcessor() {
    const auto prep = open(model_dir("text", false));
    const auto err = load_error(write("noproc.jsonl", kImageSample), prep);
    QVERIFY2(err.find("noproc.jsonl:1:") != std::string::npos, err.c_str());
    QVERIFY2(err.find("preprocessor_config.json") != std::string::npos, err.c_str());
  }

  // An image whose header claims more pixels than the decode limit is refused before decoding.
  void imageAboveTheDecodeLimit() {
    std::string png("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16);
    png += std::string("\0\0\x27\x10\0\0\x27\x10\x08\x02\0\0\0", 13);  // 10000 x 10000 RGB
    png += std::string(4, '\0');                                       // CRC (not read)
    write("huge.png", png);
    const auto prep = open(model_dir("vl", true));
    std::string line = kImageSample;
    line.replace(line.find("img.png"), 7, "huge.png");
    const auto err = load_error(write("huge.jsonl", line), prep);
    QVERIFY2(err.find("huge.jsonl:1:") != std::string::npos, err.c_str());
    QVERIFY2(err.find("huge.png") != std::string::npos, err.c_str());
    QVERIFY2(err.find("above the decode limit") != std::string::npos, err.c_str());
  }

  void missingTokenizerNamesTheFile() {
    std::filesystem::create_directories(path("empty"));
    auto p = data::SftPreparer::open(path("empty"));
    QVERIFY(!p.ok());
    QVERIFY2(p.message().find("tokenizer.json") != std::string::npos, p.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestSftPrepare)
#include "tst_sft_prepare.moc"
