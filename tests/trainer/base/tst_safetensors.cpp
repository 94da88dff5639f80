// The memory-mapped safetensors reader: whole tensors and element ranges (a rank's slice of a
// flat unit) read back what write_safetensors wrote, in each dtype; truncated files and headers
// whose offsets disagree with the shape fail naming the file and tensor.
#include <ATen/ATen.h>
#include <QTemporaryDir>
#include <QTest>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"

using namespace shardscope;

namespace {

// The message of the TrainerError `fn` raises ("" when it raises none).
template <class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const trainer::TrainerError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT

 private slots:
  void readsTensorsAndRanges() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("a.safetensors").toStdString();
    auto f32 = at::arange(24, at::kFloat).reshape({4, 6});
    auto bf16 = at::linspace(-2, 2, 10, at::kFloat).to(at::kBFloat16);
    auto i64 = at::arange(5, at::kLong) * 7;
    ckpt::write_safetensors(path, {{"w", f32}, {"b", bf16}, {"ids", i64}}, {{"format", "pt"}});
    ckpt::MappedSafetensors map(path);
    QCOMPARE(map.entries().size(), std::size_t{3});
    QCOMPARE(map.metadata().at("format"), std::string("pt"));
    const auto* w = map.find("w");
    QVERIFY(w != nullptr);
    QVERIFY(at::equal(map.read(*w), f32));
    QVERIFY(at::equal(map.read_elements(*w, 7, 9), at::arange(7, 16, at::kFloat)));
    const auto* b = map.find("b");
    QVERIFY(at::equal(map.read(*b), bf16));
    QVERIFY(at::equal(map.read_elements(*b, 3, 4), bf16.narrow(0, 3, 4)));
    QVERIFY(at::equal(map.read(*map.find("ids")), i64));
    QVERIFY(map.find("missing") == nullptr);
    const auto outside = error_of([&] { map.read_elements(*w, 20, 5); });
    QVERIFY2(outside.find("outside tensor w") != std::string::npos, outside.c_str());
    // read_safetensors goes through the map too.
    auto file = ckpt::read_safetensors(path);
    QVERIFY(at::equal(*file.find("w"), f32));
  }

  void truncatedAndLyingFilesFail() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("t.safetensors").toStdString();
    ckpt::write_safetensors(path, {{"x", at::ones({64}, at::kFloat)}});
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 16);
    const auto truncated = error_of([&] { ckpt::MappedSafetensors map(path); });
    QVERIFY2(truncated.find(path + ": tensor x: data ends at byte") != std::string::npos,
             truncated.c_str());

    const std::string shortfile = dir.filePath("s.safetensors").toStdString();
    std::ofstream(shortfile) << "abc";
    const auto tiny = error_of([&] { ckpt::MappedSafetensors map(shortfile); });
    QVERIFY2(tiny.find(shortfile + ": not a safetensors file") != std::string::npos, tiny.c_str());

    const std::string lying = dir.filePath("l.safetensors").toStdString();
    const std::string header = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
    std::ofstream out(lying, std::ios::binary);
    const std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xFF));
    out << header << std::string(12, '\0');
    out.close();
    const auto wrong = error_of([&] { ckpt::MappedSafetensors map(lying); });
    QVERIFY2(wrong.find(lying + ": tensor x: data_offsets [0, 8) do not hold a F32 tensor") !=
                 std::string::npos,
             wrong.c_str());

    // Sizes near INT64_MAX once wrapped around in the checks (undefined behaviour): each is an
    // error naming the tensor.
    const std::pair<const char*, const char*> hostile[] = {
        {R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[9223372036854775800,9223372036854775807]}})",
         "data_offsets"},
        {R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})",
         "more elements than the file has bytes"},
        {R"({"x":{"dtype":"U8","shape":[0],"data_offsets":[0,9223372036854775807]}})",
         "data_offsets"},
        {R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[9223372036854775803,9223372036854775807]}})",
         "data ends at byte"}};
    for (const auto& [text, expect] : hostile) {
      const std::string bad = dir.filePath("h.safetensors").toStdString();
      std::ofstream h(bad, std::ios::binary | std::ios::trunc);
      const std::string head = text;
      const std::uint64_t len = head.size();
      for (int i = 0; i < 8; ++i) h.put(static_cast<char>((len >> (8 * i)) & 0xFF));
      h << head << std::string(16, '\0');
      h.close();
      const auto err = error_of([&] { ckpt::MappedSafetensors map(bad); });
      QVERIFY2(err.find(bad + ": tensor x: ") != std::string::npos &&
                   err.find(expect) != std::string::npos,
               (std::string(text) + " -> " + err).c_str());
    }
  }
};

QTEST_APPLESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
