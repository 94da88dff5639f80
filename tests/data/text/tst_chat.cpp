// data/text: the Qwen2-VL chat template, labels, SFT JSONL and padding/packing.
// The reference test checks the template against transformers' apply_chat_template.
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

#include "data/text/chat.h"
#include "data/text/packing.h"
#include "data/text/sft.h"
#include "tests/data/text/tiny_tokenizer.h"

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

data::Tokenizer tiny_tokenizer() {
  auto tok = data::Tokenizer::from_json(tiny::document().dump(), "tiny.json");
  if (!tok) qFatal("%s", tok.message().c_str());
  return std::move(tok).value();
}

data::ChatSample sample(I64 ids, I64 labels) { return {std::move(ids), std::move(labels)}; }

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
    data::Tokenizer tok = tiny_tokenizer();
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
    data::Tokenizer tok = tiny_tokenizer();
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

  void paddingMasksAndPositions() {
    std::vector<data::ChatSample> s = {sample({1, 2, 3}, {-100, 2, 3}), sample({4, 5}, {4, 5})};
    auto rows = data::pad_samples(s, 4, 0);
    QVERIFY(rows.ok());
    QCOMPARE(rows->rows, 2LL);
    QCOMPARE(rows->input_ids, (I64{1, 2, 3, 0, 4, 5, 0, 0}));
    QCOMPARE(rows->labels, (I64{-100, 2, 3, -100, 4, 5, -100, -100}));
    QCOMPARE(rows->attention_mask, (I64{1, 1, 1, 0, 1, 1, 0, 0}));
    QCOMPARE(rows->position_ids, (I64{0, 1, 2, 0, 0, 1, 0, 0}));
    QVERIFY(rows->attends(0, 2, 0));
    QVERIFY(!rows->attends(0, 0, 2));
    QVERIFY(!rows->attends(0, 3, 0));  // padding attends to nothing
    auto too_long = data::pad_samples(s, 2, 0);
    QVERIFY(!too_long.ok());
    QVERIFY2(too_long.message().find("sample 0: 3 tokens, more than data.seq_len (2)") !=
                 std::string::npos,
             too_long.message().c_str());
    auto cut = data::pad_samples(s, 2, 0, true);
    QVERIFY(cut.ok());
    QCOMPARE(cut->input_ids, (I64{1, 2, 4, 5}));
  }

  void packingRestartsPositionsAndIsolatesSamples() {
    std::vector<data::ChatSample> s = {sample({1, 2, 3}, {1, 2, 3}), sample({4, 5}, {4, 5}),
                                       sample({6, 7, 8, 9}, {6, 7, 8, 9}), sample({10}, {10})};
    auto rows = data::pack_samples(s, 6, 0);
    QVERIFY(rows.ok());
    QCOMPARE(rows->rows, 2LL);
    QCOMPARE(rows->input_ids, (I64{1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10, 0}));
    QCOMPARE(rows->labels, (I64{-100, 2, 3, -100, 5, -100, -100, 7, 8, 9, -100, -100}));
    QCOMPARE(rows->position_ids, (I64{0, 1, 2, 0, 1, 0, 0, 1, 2, 3, 0, 0}));
    QCOMPARE(rows->segment_ids, (I64{1, 1, 1, 2, 2, 0, 1, 1, 1, 1, 2, 0}));
    QCOMPARE(rows->attention_mask, (I64{1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0}));
    QCOMPARE(rows->row_samples, (std::vector<I64>{{0, 1}, {2, 3}}));
    QVERIFY(rows->attends(0, 4, 3));
    QVERIFY(!rows->attends(0, 3, 2));  // sample 1 does not see sample 0
    QVERIFY(!rows->attends(1, 4, 3));
    QVERIFY(rows->attends(1, 3, 0));
  }
};

QTEST_GUILESS_MAIN(TestChat)
#include "tst_chat.moc"
