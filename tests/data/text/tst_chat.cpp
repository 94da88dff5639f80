// data/text: the Qwen2-VL chat template, labels, SFT JSONL and packing plans.
// The reference test checks the template against transformers' apply_chat_template.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "data/text/chat.h"
#include "data/text/packing.h"
#include "data/text/sft.h"
#include "tests/data/text/tiny_loaded.h"

using namespace shardscope;
using data::ChatItem;
using data::ChatMessage;
using I64 = std::vector<std::int64_t>;

namespace {

ChatMessage plain(const char* role, const char* text) {
  ChatMessage m;
  m.role = role;
  m.plain = true;
  m.text = text;
  return m;
}

ChatMessage items(const char* role, std::vector<ChatItem> list) {
  ChatMessage m;
  m.role = role;
  m.items = std::move(list);
  return m;
}

ChatItem text(const char* t) { return {ChatItem::Kind::Text, t, ""}; }
ChatItem image(const char* path) { return {ChatItem::Kind::Image, "", path}; }

}  // namespace

class TestChat : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;

  std::string write(const char* name, const std::string& body) {
    std::string path = m_dir.filePath(name).toStdString();
    std::ofstream(path, std::ios::binary) << body;
    return path;
  }

  std::string load_error(const std::string& line) {
    auto r = data::load_sft_jsonl(write("bad.jsonl",
                                        "{\"messages\":[{\"role\":\"user\",\"content\":"
                                        "\"hi\"},{\"role\":\"assistant\",\"content\":"
                                        "\"yo\"}]}\n" +
                                            line + "\n"));
    return r ? std::string() : r.message();
  }

 private slots:
  void templateWithoutSystemAddsDefault() {
    auto chat = data::render_qwen2vl_chat({plain("user", "Hi"), plain("assistant", "Hello!")});
    QCOMPARE(chat.text, std::string("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                                    "<|im_start|>user\nHi<|im_end|>\n"
                                    "<|im_start|>assistant\nHello!<|im_end|>\n"));
    QCOMPARE(chat.label_spans.size(), std::size_t{1});
    auto [b, e] = chat.label_spans[0];
    QCOMPARE(chat.text.substr(b, e - b), std::string("Hello!<|im_end|>"));
  }

  void templateWithSystemMultiTurnImages() {
    auto chat = data::render_qwen2vl_chat(
        {items("system", {text("Be brief.")}),
         items("user", {image("/a.png"), image("/b.png"), text("Same?")}),
         plain("assistant", "No."), items("user", {text("Why")}), items("assistant", {})},
        data::ChatOptions{true, false});
    QCOMPARE(chat.text, std::string("<|im_start|>system\nBe brief.<|im_end|>\n"
                                    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
                                    "<|vision_start|><|image_pad|><|vision_end|>Same?<|im_end|>\n"
                                    "<|im_start|>assistant\nNo.<|im_end|>\n"
                                    "<|im_start|>user\nWhy<|im_end|>\n"
                                    "<|im_start|>assistant\n<|im_end|>\n<|im_start|>assistant\n"));
    QCOMPARE(chat.images, 2LL);
    QCOMPARE(chat.label_spans.size(), std::size_t{2});
    auto vision = data::render_qwen2vl_chat({items("user", {image("x"), image("y")})},
                                            data::ChatOptions{false, true});
    QVERIFY(vision.text.find("Picture 1: <|vision_start|>") != std::string::npos);
    QVERIFY(vision.text.find("Picture 2: <|vision_start|>") != std::string::npos);
  }

  void labelsCoverAssistantContentAndImEnd() {
    data::Tokenizer tok = tiny::tokenizer();
    auto s = data::tokenize_chat(tok,
                                 {plain("user", "abc"), plain("assistant", "hello"),
                                  plain("user", "he"), plain("assistant", " abc")},
                                 {});
    QVERIFY(s.ok());
    std::vector<std::int32_t> labelled;
    for (std::size_t i = 0; i < s->labels.size(); ++i) {
      if (s->labels[i] != -100) {
        QCOMPARE(s->labels[i], s->input_ids[i]);
        labelled.push_back(static_cast<std::int32_t>(s->labels[i]));
      }
    }
    QCOMPARE(tok.decode(labelled), std::string("hello<|im_end|> abc<|im_end|>"));
    QCOMPARE(labelled.size(), std::size_t{2 + 4});  // hello, <|im_end|>, ' ', a, bc, <|im_end|>
    auto rendered = data::render_qwen2vl_chat({plain("user", "abc"), plain("assistant", "hello"),
                                               plain("user", "he"), plain("assistant", " abc")});
    std::vector<std::int32_t> all(s->input_ids.begin(), s->input_ids.end());
    QCOMPARE(all, tok.encode(rendered.text));
  }

  void imagePadsAreExpanded() {
    data::Tokenizer tok = tiny::tokenizer();
    std::vector<ChatMessage> chat = {items("user", {image("a"), text("x"), image("b")}),
                                     plain("assistant", "he")};
    auto s = data::tokenize_chat(tok, chat, {3, 2});
    QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
    QCOMPARE(std::count(s->input_ids.begin(), s->input_ids.end(), 305), 5L);
    for (std::size_t i = 0; i < s->input_ids.size(); ++i) {
      if (s->input_ids[i] == 305) QCOMPARE(s->labels[i], -100LL);
    }
    std::vector<std::int32_t> base(tok.encode(data::render_qwen2vl_chat(chat).text));
    QCOMPARE(s->input_ids.size(), base.size() + 3);
    auto wrong = data::tokenize_chat(tok, chat, {3});
    QVERIFY(!wrong.ok());
    QVERIFY2(wrong.message().find("2 images") != std::string::npos, wrong.message().c_str());
    auto literal =
        data::tokenize_chat(tok, {plain("user", "<|image_pad|>"), plain("assistant", "a")}, {});
    QVERIFY(!literal.ok());
  }

  void sftFileResolvesImagesAndPlainContent() {
    std::string path = write(
        "ok.jsonl",
        R"({"messages":[{"role":"user","content":[{"type":"image","image":"img/a.png"},{"type":"text","text":"What?"}]},{"role":"assistant","content":[{"type":"text","text":"red"}]}]})"
        "\n\n"
        R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"},{"role":"assistant","content":"A"}]})"
        "\n");
    auto r = data::load_sft_jsonl(path);
    QVERIFY2(r.ok(), r.ok() ? "" : r.message().c_str());
    QCOMPARE(r->size(), std::size_t{2});
    const auto& first = (*r)[0];
    QCOMPARE(first.images.size(), std::size_t{1});
    auto expected =
        (std::filesystem::path(m_dir.path().toStdString()) / "img/a.png").lexically_normal();
    QCOMPARE(first.images[0], expected.string());
    QVERIFY(std::filesystem::path(first.images[0]).is_absolute());
    QCOMPARE(first.messages[0].items[0].image, first.images[0]);
    QCOMPARE((*r)[1].where.line, 3LL);
    QVERIFY((*r)[1].messages[0].plain);
    QCOMPARE((*r)[1].messages[2].text, std::string("A"));
  }

  void badSftLinesNameFileLineAndField() {
    auto has = [](const std::string& e, const char* part) {
      if (e.find(part) == std::string::npos) qWarning("message: %s", e.c_str());
      return e.find(part) != std::string::npos;
    };
    QVERIFY(has(load_error("{oops"), "bad.jsonl:2: not a JSON object"));
    QVERIFY(has(load_error("{\"msgs\":[]}"), "bad.jsonl:2: messages: missing"));
    QVERIFY(has(load_error(R"({"messages":[{"role":"bot","content":"x"}]})"),
                "bad.jsonl:2: messages[0].role: 'bot' is not one of system, user, assistant"));
    QVERIFY(has(load_error(R"({"messages":[{"role":"user","content":[{"type":"audio"}]}]})"),
                "bad.jsonl:2: messages[0].content[0].type: 'audio' is not one of text, image"));
    QVERIFY(has(load_error(R"({"messages":[{"role":"user","content":[{"type":"image"}]}]})"),
                "messages[0].content[0].image: missing"));
    QVERIFY(has(load_error(R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})"),
                "messages[0].content[0].text: missing"));
    QVERIFY(has(load_error(R"({"messages":[{"role":"user","content":7}]})"),
                "messages[0].content: expected a string or a list"));
    QVERIFY(has(load_error(R"({"messages":[{"role":"user","content":"q"}]})"),
                "bad.jsonl:2: messages: no assistant turn"));
    QVERIFY(has(load_error(R"({"messages":[]})"), "messages: empty"));
  }

  void packingIsFirstFitDecreasing() {
    // Longest first, each into the first row with room: 5 -> row 0, 4 -> row 1, 3 -> row 2,
    // 2 -> row 1 (row 0 has 1 left), 1 -> row 0. Rows list their items in input order.
    auto packed = data::pack_rows({3, 5, 1, 4, 2}, 6);
    QVERIFY(packed.ok());
    QCOMPARE(packed->rows, (std::vector<I64>{{1, 2}, {3, 4}, {0}}));
    QCOMPARE(packed->tokens, 15LL);
    QCOMPARE(packed->efficiency(), 15.0 / 18.0);
    auto too_long = data::pack_rows({2, 7}, 6);
    QVERIFY(!too_long.ok());
    QVERIFY2(too_long.message().find("sample 1: 7 tokens") != std::string::npos &&
                 too_long.message().find("data.seq_len (6)") != std::string::npos,
             too_long.message().c_str());
    QVERIFY(!data::pack_rows({0}, 6).ok());
    QVERIFY(!data::pack_rows({1}, 0).ok());
    QCOMPARE(data::pack_rows({}, 6)->efficiency(), 1.0);
  }

  void packingPlacesEverySampleOnce() {
    // Long-tailed lengths: every item lands in exactly one row, no row overflows, and the rows
    // are fewer than one a sample.
    I64 lengths;
    std::uint64_t x = 12345;
    for (int i = 0; i < 500; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const auto u = static_cast<double>(x >> 11) / 9007199254740992.0;  // [0, 1)
      lengths.push_back(
          std::min<std::int64_t>(1 + static_cast<std::int64_t>(40.0 / (1.02 - u)), 2048));
    }
    auto packed = data::pack_rows(lengths, 2048);
    QVERIFY(packed.ok());
    std::vector<int> seen(lengths.size(), 0);
    for (const auto& row : packed->rows) {
      std::int64_t used = 0;
      QVERIFY(std::is_sorted(row.begin(), row.end()));
      for (auto i : row) {
        ++seen[static_cast<std::size_t>(i)];
        used += lengths[static_cast<std::size_t>(i)];
      }
      QVERIFY(used <= 2048);
    }
    QVERIFY(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    QVERIFY(packed->rows.size() < lengths.size() / 4);
    QVERIFY2(packed->efficiency() > 0.9, std::to_string(packed->efficiency()).c_str());
  }

  void splitRowsGivesEveryMicroBatchARow() {
    auto packed = data::pack_rows({1, 1, 1, 1, 1}, 8);
    QCOMPARE(packed->rows.size(), std::size_t{1});
    data::split_rows(*packed, 3);
    QCOMPARE(packed->rows, (std::vector<I64>{{0, 1}, {2}, {3, 4}}));
    data::split_rows(*packed, 9);  // stops once every row holds one item
    QCOMPARE(packed->rows.size(), std::size_t{5});
  }
};

QTEST_GUILESS_MAIN(TestChat)
#include "tst_chat.moc"
