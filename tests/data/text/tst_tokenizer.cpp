// data/text/tokenizer: byte-level BPE on a hand-written tokenizer.json. The
// reference test compares against Hugging Face tokenizers on a trained one.
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

#include "data/text/tokenizer.h"
#include "tests/data/text/tiny_loaded.h"

using namespace shardscope;
using data::Tokenizer;
using Ids = std::vector<std::int32_t>;

namespace {

// Loads a variant of the tiny document and returns the error message ("" if it loaded).
std::string load_error(const nlohmann::json& doc) {
  auto tok = Tokenizer::from_json(doc.dump(), "tiny.json");
  return tok ? std::string() : tok.message();
}

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT

 private slots:
  void mergesByRank() {
    Tokenizer tok = tiny::tokenizer();
    QCOMPARE(tok.encode("hello"), (Ids{259}));
    QCOMPARE(tok.encode(" hello"), (Ids{32, 259}));
    // "b c" (rank 4) merges before "a b" (rank 5), so "abc" is a + bc, not ab + c.
    QCOMPARE(tok.encode("abc"), (Ids{97, 260}));
    QCOMPARE(tok.encode("hellohe"), (Ids{259, 256}));
  }

  void specialTokensSplitFirst() {
    Tokenizer tok = tiny::tokenizer();
    std::string text = "<|im_start|>user\nhello<|im_end|>";
    QCOMPARE(tok.encode(text), (Ids{301, 117, 115, 101, 114, 10, 259, 302}));
    // As plain text, the special tokens become ordinary byte tokens and decode back.
    Ids plain = tok.encode(text, false);
    QVERIFY(std::find(plain.begin(), plain.end(), 301) == plain.end());
    QVERIFY(std::find(plain.begin(), plain.end(), 302) == plain.end());
    QCOMPARE(tok.decode(plain), text);
    QCOMPARE(tok.decode(tok.encode(text)), text);
    QCOMPARE(tok.decode(tok.encode(text), true), std::string("user\nhello"));
  }

  void addedTokensLongestMatchAndNonSpecial() {
    Tokenizer tok = tiny::tokenizer();
    QCOMPARE(tok.encode("<|x|>yz"), (Ids{308, 122}));
    QCOMPARE(tok.encode("<|x|>z"), (Ids{307, 122}));
    // A normal (non-special) added token is split out even when special tokens are not.
    QCOMPARE(tok.encode("a<tool_call>", false), (Ids{97, 306}));
    QCOMPARE(tok.encode("<|x|>", false).size(), std::size_t{5});
  }

  void whitespaceIsUnicodeWhiteSpaceAsInOniguruma() {
    Tokenizer tok = tiny::tokenizer();
    // U+180E is not White_Space (tokenizers' Oniguruma agrees) though PCRE2's \s takes it: the
    // space joins it in one piece, where the "Ġ" + 0xE1 merge applies.
    QCOMPARE(tok.encode(" \xe1\xa0\x8e"), (Ids{262, 160, 142}));
    // U+3000 is White_Space: the space before it stays in the whitespace piece.
    QCOMPARE(tok.encode(" \xe3\x80\x80"), (Ids{32, 227, 128, 128}));
  }

  void byteFallbackOfArbitraryBytes() {
    Tokenizer tok = tiny::tokenizer();
    std::string all;
    for (int b = 255; b >= 0; --b) all += static_cast<char>(b);  // invalid UTF-8 throughout
    Ids ids = tok.encode(all);
    QCOMPARE(ids.size(), std::size_t{256});
    QCOMPARE(ids.front(), 255);
    QCOMPARE(ids.back(), 0);
    QCOMPARE(tok.decode(ids), all);
    std::string mixed = "he\xff\xfell\xc3(\xe2\x82";
    QCOMPARE(tok.decode(tok.encode(mixed)), mixed);
  }

  void nfcNormalisesAndKeepsOffsets() {
    Tokenizer tok = tiny::tokenizer();
    QCOMPARE(tok.encode("cafe\xcc\x81"), tok.encode("caf\xc3\xa9"));
    QVERIFY(tok.encode("cafe\xcc\x81", true) != tok.encode("cafe", true));
    // "e" + U+0301 (3 bytes) becomes "é" (2 byte tokens), both spanning the original run.
    auto spans = tok.encode_with_offsets("ae\xcc\x81");
    QCOMPARE(spans.size(), std::size_t{3});
    QCOMPARE(spans[0].begin, 0LL);
    QCOMPARE(spans[0].end, 1LL);
    QCOMPARE(spans[1].begin, 1LL);
    QCOMPARE(spans[2].end, 4LL);
    auto plain = tok.encode_with_offsets("<|im_end|>hello");
    QCOMPARE(plain.size(), std::size_t{2});
    QCOMPARE(plain[1].begin, 10LL);
    QCOMPARE(plain[1].end, 15LL);
  }

  void lookups() {
    Tokenizer tok = tiny::tokenizer();
    QCOMPARE(tok.vocab_size(), 309LL);
    QCOMPARE(tok.token_to_id("<|im_end|>").value_or(-1), 302);
    QCOMPARE(tok.token_to_id("hello").value_or(-1), 259);
    QVERIFY(!tok.token_to_id("nope"));
    QCOMPARE(tok.id_to_token(32).value_or(""), std::string("\xc4\xa0"));  // Ġ
    QVERIFY(!tok.id_to_token(299));
    QCOMPARE(tok.added_tokens().size(), std::size_t{9});
  }

  void loadsFromDirectory() {
    QTemporaryDir dir;
    std::ofstream(dir.filePath("tokenizer.json").toStdString()) << tiny::document().dump();
    auto tok = Tokenizer::load(dir.path().toStdString());
    QVERIFY2(tok.ok(), tok.ok() ? "" : tok.message().c_str());
    QCOMPARE(tok->encode("hello"), (Ids{259}));
    auto missing = Tokenizer::load(dir.filePath("none").toStdString());
    QVERIFY(!missing.ok());
    QVERIFY2(missing.message().find("none") != std::string::npos, missing.message().c_str());
    QVERIFY(!Tokenizer::from_json("{not json", "x.json").ok());
  }

  void unknownTypesNameFileAndField() {
    auto doc = tiny::document();
    doc["model"]["type"] = "WordPiece";
    std::string e = load_error(doc);
    QVERIFY2(e.find("tiny.json: model.type: 'WordPiece' is not supported") != std::string::npos,
             e.c_str());

    doc = tiny::document();
    doc["pre_tokenizer"]["pretokenizers"][0]["type"] = "Whitespace";
    e = load_error(doc);
    QVERIFY2(
        e.find("tiny.json: pre_tokenizer.pretokenizers[0].type: 'Whitespace'") != std::string::npos,
        e.c_str());

    doc = tiny::document();
    doc["normalizer"]["type"] = "NFKC";
    e = load_error(doc);
    QVERIFY2(e.find("normalizer.type: 'NFKC'") != std::string::npos, e.c_str());

    doc = tiny::document();
    doc["pre_tokenizer"] = doc["pre_tokenizer"]["pretokenizers"][0];
    e = load_error(doc);
    QVERIFY2(e.find("pre_tokenizer: has no ByteLevel step") != std::string::npos, e.c_str());

    doc = tiny::document();
    doc["model"]["merges"][0] = {"h", "zz"};
    e = load_error(doc);
    QVERIFY2(e.find("model.merges[0]") != std::string::npos, e.c_str());

    doc = tiny::document();
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
    e = load_error(doc);
    QVERIFY2(e.find("pattern.Regex: the regex does not compile") != std::string::npos, e.c_str());
  }

  void outOfRangeIdsAreErrorsNotCrashes() {
    // An added token with id -1 once wrote before the token table (a crash), and one with id
    // 2,000,000,000 asked for 2e9 strings (bad_alloc): both are errors naming file and field.
    for (const long long id : {-1LL, 2000000000LL, 5000000000LL}) {
      auto doc = tiny::document();
      doc["added_tokens"][0]["id"] = id;
      const std::string e = load_error(doc);
      QVERIFY2(e.find("tiny.json: added_tokens[0].id: id " + std::to_string(id) +
                      " is not an integer in [0, 16777216)") != std::string::npos,
               e.c_str());
    }
    auto doc = tiny::document();
    doc["model"]["vocab"]["h"] = -5;
    const std::string e = load_error(doc);
    QVERIFY2(
        e.find("model.vocab[\"h\"]: id -5 is not an integer in [0, 16777216)") != std::string::npos,
        e.c_str());
  }

  void wrongFieldTypesAreErrorsNotCrashes() {
    // A field of another type ("model": {"type": 1}, "normalizer": 5) made json::value() throw
    // out of from_json, which ended the process; each is an error naming file and section.
    const std::pair<const char*, nlohmann::json> cases[] = {
        {"model", nlohmann::json::object({{"type", 1}})},
        {"normalizer", 5},
        {"pre_tokenizer", nlohmann::json::object({{"type", "Sequence"}, {"pretokenizers", 3}})},
        {"added_tokens", nlohmann::json::array({nlohmann::json::object(
                             {{"id", 300}, {"content", "<x>"}, {"special", "yes"}})})},
        {"decoder", nlohmann::json::array()}};
    for (const auto& [section, value] : cases) {
      auto doc = tiny::document();
      doc[section] = value;
      const std::string e = load_error(doc);
      QVERIFY2(e.find(std::string("tiny.json: ") + section) != std::string::npos, e.c_str());
    }
  }

  void oldMergeSpellingLoads() {
    auto doc = tiny::document();
    for (auto& m : doc["model"]["merges"])
      m = m[0].get<std::string>() + " " + m[1].get<std::string>();
    auto tok = Tokenizer::from_json(doc.dump(), "old.json");
    QVERIFY(tok.ok());
    QCOMPARE(tok->encode("hello abc"), (Ids{259, 32, 97, 260}));
  }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "tst_tokenizer.moc"
