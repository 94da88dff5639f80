// Unit tests of the shapes demo data generator: same seed same bytes, every answer
// class present, train and eval on different images, the JSONL in the SFT format, and the
// drawn scene matching its answers.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/image/image.h"
#include "data/image/shapes.h"
#include "data/jsonl.h"
#include "data/text/probes.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::data;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every file under `dir`, relative path -> bytes.
std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file())
      files[fs::relative(entry.path(), dir).string()] = slurp(entry.path());
  }
  return files;
}

struct Sample {
  std::string image;
  std::string question;
  std::string answer;
};

std::vector<Sample> read_samples(const std::string& path) {
  std::vector<Sample> out;
  auto n = read_jsonl(path, [&](const nlohmann::json& r, const JsonlPosition&) -> Result<void> {
    const auto& user = r.at("messages").at(0);
    if (user.at("role") != "user") return fail("first turn is not the user's");
    out.push_back({user.at("content").at(0).at("image").get<std::string>(),
                   user.at("content").at(1).at("text").get<std::string>(),
                   r.at("messages").at(1).at("content").get<std::string>()});
    return ok();
  });
  if (!n.ok()) out.clear();
  return out;
}

// The scene's foreground: pixels more than 40 levels away in some channel from the grey
// background (the Qwen2-VL normaliser's mean, 123 117 104, give or take 8).
int coloured_pixels(const RgbImage& image, int x0, int x1, int y0, int y1) {
  constexpr int kBackground[3] = {123, 117, 104};
  int n = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      int far = 0;
      for (int c = 0; c < 3; ++c) far = std::max(far, std::abs(image.at(y, x, c) - kBackground[c]));
      if (far > 40) ++n;
    }
  }
  return n;
}

}  // namespace

class TestShapes : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;

 private slots:
  void sameSeedSameBytes() {
    std::string a = m_dir.filePath("a").toStdString();
    std::string b = m_dir.filePath("b").toStdString();
    std::string c = m_dir.filePath("c").toStdString();
    VERIFY_OK(make_shapes(a, 40, 12, 7, 112));
    VERIFY_OK(make_shapes(b, 40, 12, 7, 112));
    VERIFY_OK(make_shapes(c, 40, 12, 8, 112));
    auto ta = tree(a);
    // train.jsonl, eval.jsonl, probes.jsonl, 52 sample images and the probes' images.
    QCOMPARE(ta.size(), std::size_t{3 + 52 + kShapesProbeImages});
    QVERIFY(ta == tree(b));
    QVERIFY(ta.at("img/000000.png") != tree(c).at("img/000000.png"));  // the seed matters
  }

  void everyQuestionTypeHasFourOrMoreAnswers() {
    auto summary = make_shapes(m_dir.filePath("classes").toStdString(), 200, 40, 1, 112);
    VERIFY_OK(summary);
    QCOMPARE(summary->train_answers.size(), std::size_t{4});
    for (const auto& [type, answers] : summary->train_answers) {
      QVERIFY2(answers.size() >= 4, type.c_str());
      std::int64_t total = 0;
      for (const auto& [answer, n] : answers) total += n;
      QCOMPARE(total, 50LL);  // question types cycle: a quarter each
    }
    QCOMPARE(summary->train_answers.at("colour").size(), std::size_t{6});
    std::set<std::string> counts;
    for (const auto& [answer, n] : summary->train_answers.at("count")) counts.insert(answer);
    QCOMPARE(counts, (std::set<std::string>{"1", "2", "3", "4"}));
    // The JSONL agrees with the summary.
    std::map<std::string, std::int64_t> positions;
    for (const Sample& s : read_samples(summary->train_path))
      if (s.question.rfind("Where", 0) == 0) positions[s.answer] += 1;
    QCOMPARE(positions, summary->train_answers.at("position"));
  }

  void trainAndEvalUseDifferentImages() {
    std::string dir = m_dir.filePath("split").toStdString();
    auto summary = make_shapes(dir, 60, 20, 3, 112);
    VERIFY_OK(summary);
    std::vector<Sample> train = read_samples(summary->train_path);
    std::vector<Sample> eval = read_samples(summary->eval_path);
    QCOMPARE(train.size(), std::size_t{60});
    QCOMPARE(eval.size(), std::size_t{20});
    std::set<std::string> train_files;
    std::set<std::string> train_bytes;
    for (const Sample& s : train) {
      train_files.insert(s.image);
      train_bytes.insert(slurp(fs::path(dir) / s.image));
    }
    QCOMPARE(train_files.size(), train.size());
    for (const Sample& s : eval) {
      QVERIFY2(!train_files.contains(s.image), s.image.c_str());
      QVERIFY2(!train_bytes.contains(slurp(fs::path(dir) / s.image)), s.image.c_str());
    }
  }

  void recordsAreSftJsonlWithReadablePngs() {
    std::string dir = m_dir.filePath("fmt").toStdString();
    auto summary = make_shapes(dir, 4, 0, 5, 112);
    VERIFY_OK(summary);
    std::ifstream in(summary->train_path);
    std::string line;
    std::getline(in, line);
    auto record = nlohmann::json::parse(line);
    QCOMPARE(record["messages"][0]["content"][0]["type"].get<std::string>(), std::string("image"));
    QCOMPARE(record["messages"][0]["content"][0]["image"].get<std::string>(),
             std::string("img/000000.png"));
    QCOMPARE(record["messages"][0]["content"][1]["type"].get<std::string>(), std::string("text"));
    QCOMPARE(record["messages"][1]["role"].get<std::string>(), std::string("assistant"));
    QVERIFY(line.find("{\"messages\":[{\"role\":\"user\"") == 0);
    auto image = read_image(dir + "/img/000000.png");
    VERIFY_OK(image);
    QCOMPARE(image->width, 112);
    QCOMPARE(image->height, 112);
  }

  void drawnSceneMatchesItsAnswers() {
    // Shapes sit in the named side's cell of a 3x3 grid; the rest of the canvas is background.
    for (int position = 0; position < 4; ++position) {
      ShapesScene scene{2, 0, 3, position};
      RgbImage image = render_shapes(scene, 112, 99);
      const int cell = 112 / 3;
      const int col[4] = {0, 2, 1, 1};
      const int row[4] = {1, 1, 0, 2};
      const int x0 = col[position] * cell;
      const int y0 = row[position] * cell;
      const int inside = coloured_pixels(image, x0, x0 + cell, y0, y0 + cell);
      const int everywhere = coloured_pixels(image, 0, 112, 0, 112);
      QVERIFY2(inside > 3 * 40, kShapesPositions[position]);  // three circles of radius ~7
      QCOMPARE(everywhere, inside);
      // Every drawn pixel is blue.
      int blue = 0;
      for (int y = y0; y < y0 + cell; ++y)
        for (int x = x0; x < x0 + cell; ++x)
          if (image.at(y, x, 2) > image.at(y, x, 0) + 80 && image.at(y, x, 2) < 240) ++blue;
      QCOMPARE(blue, inside);
    }
  }

  void atTheDemoSizeEachShapeIsOneMergedToken() {
    // At 168 px the image is 6x6 merged tokens of 28 px (2x2 patches of 14): a scene of `count`
    // shapes colours exactly `count` tokens, all in the named side's 2x2 block of tokens, and
    // every token it colours holds one whole shape (no shape crosses a token's edge).
    constexpr int kToken = 28;
    const int block_col[4] = {0, 4, 2, 2};  // first token column of left, right, top, bottom
    const int block_row[4] = {2, 2, 0, 4};
    for (int position = 0; position < 4; ++position) {
      for (int count = 1; count <= 4; ++count) {
        ShapesScene scene{1, position % 4, count, position};
        RgbImage image = render_shapes(scene, 168, 1000 + position * 10 + count);
        int tokens = 0;
        int area = 0;
        for (int ty = 0; ty < 6; ++ty) {
          for (int tx = 0; tx < 6; ++tx) {
            const int x0 = tx * kToken;
            const int y0 = ty * kToken;
            const int n = coloured_pixels(image, x0, x0 + kToken, y0, y0 + kToken);
            if (n == 0) continue;
            ++tokens;
            const bool in_block = tx >= block_col[position] && tx < block_col[position] + 2 &&
                                  ty >= block_row[position] && ty < block_row[position] + 2;
            QVERIFY2(in_block, kShapesPositions[position]);
            QVERIFY(n > 150);  // a whole shape of radius 11, not a sliver of a neighbour's
            // A shape cut by a token edge would leave unequal parts in two tokens; whole
            // shapes of one kind and size colour the same number of pixels in each token.
            if (area == 0) area = n;
            QCOMPARE(n, area);
          }
        }
        QCOMPARE(tokens, count);
      }
    }
  }

  // probes.jsonl: what the trainer's probe reader loads, every question type asked, each answer
  // the reference of its scene (the drawn image's answers, as for train samples), two probes per
  // image, and images that are none of the train or eval ones (another seed, other images).
  void probesAskEveryTypeOnTheirOwnImages() {
    const std::string dir = m_dir.filePath("probes").toStdString();
    auto summary = make_shapes(dir, 8, 4, 11, 112);
    VERIFY_OK(summary);
    QCOMPARE(summary->probes_path, (fs::path(dir) / "probes.jsonl").string());
    auto probes = load_probes(summary->probes_path);
    VERIFY_OK(probes);
    QCOMPARE(probes->size(), std::size_t{kShapesProbes});
    std::set<std::string> types;
    std::map<std::string, int> perImage;
    std::set<std::string> sampleBytes;
    for (const auto& rows : {read_samples(summary->train_path), read_samples(summary->eval_path)})
      for (const Sample& s : rows) sampleBytes.insert(slurp(fs::path(dir) / s.image));
    std::ifstream in(summary->probes_path);
    std::string line;
    for (const Probe& probe : *probes) {
      QVERIFY(std::getline(in, line));
      const auto record = nlohmann::json::parse(line);
      const std::string image = record["messages"][0]["content"][0]["image"].get<std::string>();
      perImage[image] += 1;
      QVERIFY2(image.rfind("img/probe-", 0) == 0, image.c_str());
      QVERIFY2(!sampleBytes.contains(slurp(fs::path(dir) / image)), image.c_str());
      QVERIFY(probe.reference.has_value() && !probe.reference->empty());
      const std::string type = probe.id.substr(0, probe.id.find('-'));
      types.insert(type);
      QVERIFY2(std::find(kShapesQuestionTypes.begin(), kShapesQuestionTypes.end(), type) !=
                   kShapesQuestionTypes.end(),
               probe.id.c_str());
      QCOMPARE(probe.sample.images.size(), std::size_t{1});
    }
    QCOMPARE(types.size(), kShapesQuestionTypes.size());
    QCOMPARE(perImage.size(), std::size_t{kShapesProbeImages});
    for (const auto& [image, n] : perImage) QCOMPARE(n, 2);
  }

  void refusesTinyImages() {
    auto summary = make_shapes(m_dir.filePath("tiny").toStdString(), 1, 1, 1, 20);
    QVERIFY(!summary.ok());
    QVERIFY2(summary.message().find("below 56") != std::string::npos, summary.message().c_str());
  }
};

QTEST_APPLESS_MAIN(TestShapes)
#include "tst_shapes.moc"
