// Unit tests of data/image: decoding and its errors, smart resize, PIL's bicubic resize,
// the image processor config and the patch order. The numbers marked "Pillow 13.0.0"
// and "transformers 5.23.0" were computed by those libraries; ref_qwen2vl_image.py re-derives
// the whole pipeline against them.
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "data/image/image.h"
#include "data/image/qwen2vl_preprocess.h"
#include "data/image/resize.h"
#include "data/image/stb/stb_codec.h"
#include "tests/support/paths.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::data;

namespace {

// The 8x5 test pattern: a 0/255 checkerboard in R (so bicubic overshoots and clips), ramps in G/B.
RgbImage checker_pattern() {
  RgbImage image{5, 8, std::vector<std::uint8_t>(std::size_t{5} * 8 * 3)};
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 5; ++x) {
      std::uint8_t* p = &image.pixels[static_cast<std::size_t>(y * 5 + x) * 3];
      p[0] = static_cast<std::uint8_t>(((y + x) % 2) * 255);
      p[1] = static_cast<std::uint8_t>((y * 30) % 256);
      p[2] = static_cast<std::uint8_t>((x * 50) % 256);
    }
  }
  return image;
}

std::vector<std::uint8_t> to_vector(std::initializer_list<int> values) {
  std::vector<std::uint8_t> out;
  for (int v : values) out.push_back(static_cast<std::uint8_t>(v));
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

class TestImage : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;

  std::string path(const char* name) const { return m_dir.filePath(name).toStdString(); }

  std::string write(const char* name, const std::vector<std::uint8_t>& bytes) {
    std::string p = path(name);
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return p;
  }

 private slots:
  void smartResizeMatchesTransformers_data() {
    QTest::addColumn<int>("h");
    QTest::addColumn<int>("w");
    QTest::addColumn<qint64>("max_pixels");
    QTest::addColumn<int>("want_h");
    QTest::addColumn<int>("want_w");
    // transformers 5.23.0 smart_resize(h, w, 28, 3136, max_pixels)
    QTest::newRow("one patch grows to min") << 28 << 28 << 12845056LL << 56 << 56;
    QTest::newRow("1x1") << 1 << 1 << 12845056LL << 56 << 56;
    QTest::newRow("tiny 10x20") << 10 << 20 << 12845056LL << 56 << 84;
    QTest::newRow("half rounds to even 0") << 14 << 42 << 12845056LL << 56 << 112;
    QTest::newRow("ties 1.5 and 2.5") << 42 << 70 << 12845056LL << 56 << 56;
    QTest::newRow("huge square") << 10000 << 10000 << 12845056LL << 3556 << 3556;
    QTest::newRow("huge square small max") << 10000 << 10000 << 100352LL << 308 << 308;
    QTest::newRow("4000x3000") << 4000 << 3000 << 12845056LL << 4004 << 2996;
    QTest::newRow("wide extreme") << 30 << 5999 << 12845056LL << 28 << 5992;
    QTest::newRow("wide extreme small max") << 30 << 5999 << 100352LL << 28 << 4452;
    QTest::newRow("tall extreme small max") << 5999 << 30 << 100352LL << 4452 << 28;
    QTest::newRow("1080p small max") << 1080 << 1920 << 100352LL << 224 << 420;
  }

  void smartResizeMatchesTransformers() {
    QFETCH(int, h);
    QFETCH(int, w);
    QFETCH(qint64, max_pixels);
    QFETCH(int, want_h);
    QFETCH(int, want_w);
    auto size = smart_resize(h, w, 28, 3136, max_pixels);
    VERIFY_OK(size);
    QCOMPARE(size->height, want_h);
    QCOMPARE(size->width, want_w);
  }

  void smartResizeRefusesAspectAbove200() {
    auto size = smart_resize(10, 2001, 28, 3136, 12845056);
    QVERIFY(!size.ok());
    QVERIFY2(contains(size.message(), "aspect ratio above 200"), size.message().c_str());
    VERIFY_OK(smart_resize(10, 2000, 28, 3136, 12845056));
  }

  void bicubicEqualsPillow() {
    // Pillow 13.0.0: Image.fromarray(checker_pattern).resize((W, H), Image.BICUBIC)
    RgbImage in = checker_pattern();
    RgbImage down = resize_bicubic(in, 4, 2);  // height shrinks most: vertical pass first
    QCOMPARE(down.width, 4);
    QCOMPARE(down.height, 2);
    QCOMPARE(down.pixels, to_vector({122, 50,  7, 130, 50,  68, 130, 50,  132, 122, 50,  193,
                                     133, 160, 7, 125, 160, 68, 125, 160, 132, 133, 160, 193}));
    RgbImage up = resize_bicubic(in, 9, 11);  // overshoot clipped to 0 and 255
    QCOMPARE(up.pixels.size(), std::size_t{9} * 11 * 3);
    const std::vector<std::uint8_t> first_row =
        to_vector({0,   0,   0, 74,  0,   12, 255, 0,  44, 151, 0, 72, 0,  0,
                   100, 151, 0, 128, 255, 0,  156, 74, 0,  188, 0, 0,  204});
    QCOMPARE(std::vector<std::uint8_t>(up.pixels.begin(), up.pixels.begin() + 27), first_row);
    const std::vector<std::uint8_t> last_row =
        to_vector({255, 212, 0,   181, 212, 12,  0,   212, 44,  104, 212, 72,  255, 212,
                   100, 104, 212, 128, 0,   212, 156, 181, 212, 188, 255, 212, 204});
    QCOMPARE(std::vector<std::uint8_t>(up.pixels.end() - 27, up.pixels.end()), last_row);
  }

  void bicubicKeepsConstantsAndSameSize() {
    RgbImage flat{37, 100, std::vector<std::uint8_t>(std::size_t{37} * 100 * 3, 77)};
    RgbImage out = resize_bicubic(flat, 28, 112);
    QCOMPARE(out.pixels, std::vector<std::uint8_t>(std::size_t{28} * 112 * 3, 77));
    RgbImage in = checker_pattern();
    QCOMPARE(resize_bicubic(in, 5, 8).pixels, in.pixels);
  }

  void patchOrderIsTransformers() {
    // 56x56 needs no resize; without rescale/normalise the values are the raw pixels.
    RgbImage image{56, 56, std::vector<std::uint8_t>(std::size_t{56} * 56 * 3)};
    for (int y = 0; y < 56; ++y) {
      for (int x = 0; x < 56; ++x) {
        image.pixels[(y * 56 + x) * 3 + 0] = static_cast<std::uint8_t>(y);
        image.pixels[(y * 56 + x) * 3 + 1] = static_cast<std::uint8_t>(x);
        image.pixels[(y * 56 + x) * 3 + 2] = static_cast<std::uint8_t>(100 + (y / 14) * 4 + x / 14);
      }
    }
    Qwen2VLImageConfig config;
    config.do_rescale = false;
    config.do_normalize = false;
    auto patches = preprocess_qwen2vl(image, config);
    VERIFY_OK(patches);
    QCOMPARE(patches->grid_t, 1LL);
    QCOMPARE(patches->grid_h, 4LL);
    QCOMPARE(patches->grid_w, 4LL);
    QCOMPARE(patches->patch_dim, 1176LL);
    QCOMPARE(patches->num_tokens(), 4LL);
    QCOMPARE(patches->pixel_values.size(), std::size_t{16} * 1176);
    auto value = [&](int row, int col) { return patches->pixel_values[row * 1176 + col]; };
    // Rows go merge window by merge window: (0,0) (0,1) (1,0) (1,1), then the window right of it.
    const int grid_of_row[8][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}};
    for (int row = 0; row < 8; ++row) {
      QCOMPARE(value(row, 2 * 196 * 2), 100.0F + grid_of_row[row][0] * 4 + grid_of_row[row][1]);
    }
    QCOMPARE(value(8, 2 * 196 * 2), 100.0F + 2 * 4 + 0);  // second row of windows
    // Columns: channel, then the temporal copy, then patch row, then patch column.
    const int row = 5;                                           // grid (0, 3): y 0..13, x 42..55
    QCOMPARE(value(row, 0 * 392 + 0 * 196 + 3 * 14 + 5), 3.0F);  // R = y
    QCOMPARE(value(row, 1 * 392 + 0 * 196 + 3 * 14 + 5), 42.0F + 5);  // G = x
    for (int k = 0; k < 196; ++k) {
      for (int c = 0; c < 3; ++c) QCOMPARE(value(row, c * 392 + 196 + k), value(row, c * 392 + k));
    }
  }

  void normalisesAsNumpy() {
    RgbImage white{56, 56, std::vector<std::uint8_t>(std::size_t{56} * 56 * 3, 255)};
    Qwen2VLImageConfig config;  // CLIP mean/std, 1/255
    auto patches = preprocess_qwen2vl(white, config);
    VERIFY_OK(patches);
    // numpy: (float32(255 * (1/255)) - float32(mean)) / float32(std)
    QCOMPARE(patches->pixel_values[0], (1.0F - 0.48145466F) / 0.26862954F);
    QCOMPARE(patches->pixel_values[std::size_t{2} * 392], (1.0F - 0.40821073F) / 0.27577711F);
  }

  void imageTokensFollowSmartResize() {
    Qwen2VLImageConfig config;
    config.max_pixels = 100352;
    auto tokens = qwen2vl_image_tokens(1080, 1920, config);
    VERIFY_OK(tokens);
    QCOMPARE(*tokens, std::int64_t{(224 / 14) * (420 / 14) / 4});
  }

  void readsPublishedAndTransformers5Configs() {
    using nlohmann::json;
    auto flat = parse_qwen2vl_image_config(json{{"min_pixels", 1000},
                                                {"max_pixels", 5000},
                                                {"patch_size", 16},
                                                {"merge_size", 2},
                                                {"image_mean", {0.5, 0.5, 0.5}},
                                                {"image_std", 0.25}},
                                           "p.json");
    VERIFY_OK(flat);
    QCOMPARE(flat->min_pixels, 1000LL);
    QCOMPARE(flat->max_pixels, 5000LL);
    QCOMPARE(flat->factor(), 32);
    QCOMPARE(flat->image_std[2], 0.25F);
    auto sized = parse_qwen2vl_image_config(
        json{{"size", {{"shortest_edge", 3136}, {"longest_edge", 100352}}}, {"max_pixels", 200704}},
        "p.json");
    VERIFY_OK(sized);
    QCOMPARE(sized->min_pixels, 3136LL);
    QCOMPARE(sized->max_pixels, 200704LL);  // the flat key wins, as in transformers
    std::ofstream(path("processor_config.json"))
        << json{{"image_processor", {{"size", {{"shortest_edge", 784}, {"longest_edge", 6272}}}}}}
               .dump();
    auto nested = read_qwen2vl_image_config(m_dir.path().toStdString());
    VERIFY_OK(nested);
    QCOMPARE(nested->min_pixels, 784LL);
    QCOMPARE(nested->max_pixels, 6272LL);
  }

  void badConfigsNameFieldAndFix() {
    using nlohmann::json;
    auto swapped =
        parse_qwen2vl_image_config(json{{"min_pixels", 9000}, {"max_pixels", 10}}, "pp.json");
    QVERIFY(!swapped.ok());
    QVERIFY2(contains(swapped.message(), "pp.json: min_pixels (9000) is above max_pixels (10)"),
             swapped.message().c_str());
    auto text = parse_qwen2vl_image_config(json{{"patch_size", "14"}}, "pp.json");
    QVERIFY(!text.ok());
    QVERIFY2(contains(text.message(), "pp.json: patch_size must be a positive integer"),
             text.message().c_str());
    auto bilinear = parse_qwen2vl_image_config(json{{"resample", 2}}, "pp.json");
    QVERIFY(!bilinear.ok());
    QVERIFY2(contains(bilinear.message(), "only BICUBIC (3)"), bilinear.message().c_str());
    auto mean = parse_qwen2vl_image_config(json{{"image_mean", {0.5, 0.5}}}, "pp.json");
    QVERIFY(!mean.ok());
    QVERIFY2(contains(mean.message(), "image_mean must be a list of 3 numbers"),
             mean.message().c_str());
    QTemporaryDir empty;
    auto none = read_qwen2vl_image_config(empty.path().toStdString());
    QVERIFY(!none.ok());
    QVERIFY2(contains(none.message(), "no preprocessor_config.json or processor_config.json"),
             none.message().c_str());
  }

  void pngRoundTripAndGreyReplicated() {
    RgbImage in = checker_pattern();
    std::string file = write("rt.png", encode_png(in));
    auto back = read_image(file);
    VERIFY_OK(back);
    QCOMPARE(back->width, 5);
    QCOMPARE(back->height, 8);
    QCOMPARE(back->pixels, in.pixels);
    const std::uint8_t grey[4] = {0, 90, 180, 255};
    auto decoded = decode_image(detail::stb_encode_png(grey, 2, 2, 1), "grey.png");
    VERIFY_OK(decoded);
    QCOMPARE(decoded->pixels, to_vector({0, 0, 0, 90, 90, 90, 180, 180, 180, 255, 255, 255}));
  }

  void alphaCompositedOntoWhiteLikePil() {
    // Grey + alpha: transparent -> white, opaque -> itself, half -> PIL's rounded blend.
    const std::uint8_t grey_alpha[6] = {100, 0, 100, 255, 100, 128};
    auto decoded = decode_image(detail::stb_encode_png(grey_alpha, 3, 1, 2), "ga.png");
    VERIFY_OK(decoded);
    QCOMPARE(decoded->pixels, to_vector({255, 255, 255, 100, 100, 100, 177, 177, 177}));
  }

  void missingFileNamesIt() {
    auto image = read_image(path("nope.png"));
    QVERIFY(!image.ok());
    QVERIFY2(contains(image.message(), "nope.png: cannot open the image"), image.message().c_str());
    QVERIFY2(contains(image.message(), "check the path"), image.message().c_str());
  }

  void truncatedPngIsCorrupt() {
    RgbImage noise{64, 64, std::vector<std::uint8_t>(std::size_t{64} * 64 * 3)};
    for (std::size_t i = 0; i < noise.pixels.size(); ++i)
      noise.pixels[i] = static_cast<std::uint8_t>((i * 7919) % 251);
    std::vector<std::uint8_t> png = encode_png(noise);
    png.resize(png.size() / 2);
    auto image = read_image(write("cut.png", png));
    QVERIFY(!image.ok());
    QVERIFY2(contains(image.message(), "cut.png: corrupt or truncated image"),
             image.message().c_str());
  }

  void notAnImageSaysWhat() {
    const std::string text = "{\"messages\": []}\n";
    auto plain = read_image(write("notes.png", {text.begin(), text.end()}));
    QVERIFY(!plain.ok());
    QVERIFY2(contains(plain.message(), "notes.png: not a PNG or JPEG image; convert it"),
             plain.message().c_str());
    const std::vector<std::uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0};
    auto other = read_image(write("anim.gif", gif));
    QVERIFY(!other.ok());
    QVERIFY2(contains(other.message(), "anim.gif: GIF images are not supported"),
             other.message().c_str());
    auto empty = read_image(write("empty.jpg", {}));
    QVERIFY(!empty.ok());
    QVERIFY2(contains(empty.message(), "empty.jpg: the image file is empty"),
             empty.message().c_str());
  }

  // Found by fuzz_image: a PNG header of 4294967295x4294967295 overflowed the pixel count (it
  // went negative and passed), and a JPEG whose frame header follows a fill byte (FF FF C0) hid
  // its 2000x2000 from the header walk, so stb allocated for it. Both are refused by size now.
  void sizeCheckHoldsForOverflowAndHiddenFrames() {
    const std::string corpus =
        shardscope::testing::sourceDir().toStdString() + "/tests/fuzz/corpus/image/";
    auto overflow = read_image(corpus + "regress-png-size-overflow.png", 1000);
    QVERIFY(!overflow.ok());
    QVERIFY2(contains(overflow.message(),
                      "4294967295x4294967295 = 18446744065119617025 pixels is above the decode "
                      "limit of 1000"),
             overflow.message().c_str());
    auto hidden = read_image(corpus + "regress-jpeg-fill-byte-hides-size.jpg", 1000);
    QVERIFY(!hidden.ok());
    QVERIFY2(contains(hidden.message(),
                      "regress-jpeg-fill-byte-hides-size.jpg: 2000x2000 = 4000000 pixels is above "
                      "the decode limit of 1000"),
             hidden.message().c_str());
  }

  // Found by fuzz_image: a JPEG Huffman table whose 16 code counts sum above 256 made stb_image
  // 2.27 write past its 257-entry code-size array, and a progressive scan that uses an AC table
  // no DHT defined made it decode from uninitialised memory (a symbol index of -95). Both are
  // refused before stb sees the file; baseline, progressive and grey JPEGs still decode.
  void corruptHuffmanTablesRefusedValidOnesDecode() {
    const std::string corpus =
        shardscope::testing::sourceDir().toStdString() + "/tests/fuzz/corpus/image/";
    const std::pair<const char*, const char*> bad[] = {
        {"regress-jpeg-huffman-table-overflow.jpg", "a Huffman table with more than 256 codes"},
        {"regress-jpeg-scan-uses-undefined-table.jpg",
         "a scan uses a Huffman table the file does not define"}};
    for (const auto& [file, why] : bad) {
      auto image = read_image(corpus + file);
      QVERIFY(!image.ok());
      QVERIFY2(contains(image.message(), file + std::string(": corrupt JPEG (") + why),
               image.message().c_str());
    }
    for (const char* file : {"baseline.jpg", "progressive.jpg", "grey.jpg"}) {
      auto image = read_image(corpus + file);
      QVERIFY2(image.ok(), image.ok() ? file : image.message().c_str());
    }
  }

  void tooLargeRefusedBeforeDecoding() {
    RgbImage small{20, 20, std::vector<std::uint8_t>(std::size_t{20} * 20 * 3, 9)};
    auto limited = decode_image(encode_png(small), "small.png", 399);
    QVERIFY(!limited.ok());
    QVERIFY2(contains(limited.message(),
                      "small.png: 20x20 = 400 pixels is above the decode limit of 399"),
             limited.message().c_str());
    QVERIFY2(contains(limited.message(), "downscale the image"), limited.message().c_str());
    // A header that claims 10000x10000 (a decompression bomb) is refused from the header alone,
    // and so is one beyond what stb reads at all (more than 2^30 bytes of pixels).
    std::vector<std::uint8_t> png = encode_png(small);
    const std::uint8_t big[8] = {0, 0, 0x27, 0x10, 0, 0, 0x27, 0x10};  // IHDR width, height
    std::copy(big, big + 8, png.begin() + 16);
    auto bomb = read_image(write("bomb.png", png));
    QVERIFY(!bomb.ok());
    QVERIFY2(contains(bomb.message(), "bomb.png: 10000x10000 = 100000000 pixels is above"),
             bomb.message().c_str());
    const std::uint8_t huge[8] = {0, 0, 0x75, 0x30, 0, 0, 0x75, 0x30};  // 30000x30000
    std::copy(huge, huge + 8, png.begin() + 16);
    auto beyond = read_image(write("huge.png", png));
    QVERIFY(!beyond.ok());
    QVERIFY2(contains(beyond.message(), "huge.png: 30000x30000 = 900000000 pixels is above"),
             beyond.message().c_str());
    // JPEG: SOI, then a start-of-frame claiming 10000 (height) x 12000 (width).
    const std::vector<std::uint8_t> jpeg = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00,
                                            0xFF, 0xC0, 0x00, 0x11, 0x08, 0x27, 0x10, 0x2E,
                                            0xE0, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01};
    auto wide = read_image(write("wide.jpg", jpeg));
    QVERIFY(!wide.ok());
    QVERIFY2(contains(wide.message(), "wide.jpg: 12000x10000 = 120000000 pixels is above"),
             wide.message().c_str());
  }
};

QTEST_APPLESS_MAIN(TestImage)
#include "tst_image.moc"
