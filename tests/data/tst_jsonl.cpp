#include <QTemporaryDir>
#include <QTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "data/jsonl.h"

using namespace shardscope;

class TestJsonl : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;

  std::string write(const char* name, const std::string& text) {
    std::string path = m_dir.filePath(name).toStdString();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

 private slots:
  void readsRecordsWithPositions() {
    std::string path = write("ok.jsonl", "{\"a\":1}\n\n{\"a\":2}\r\n{\"a\":3}");
    std::vector<std::pair<int, std::int64_t>> seen;
    auto n = data::read_jsonl(path, [&](const nlohmann::json& r, const data::JsonlPosition& at) {
      seen.emplace_back(r.at("a").get<int>(), at.line);
      return ok();
    });
    QVERIFY(n.ok());
    QCOMPARE(*n, 3LL);
    QCOMPARE(seen, (std::vector<std::pair<int, std::int64_t>>{{1, 1}, {2, 3}, {3, 4}}));
  }

  void badLineNamesFileAndLine() {
    std::string path = write("bad.jsonl", "{\"a\":1}\n{oops\n");
    auto n = data::read_jsonl(
        path, [](const nlohmann::json&, const data::JsonlPosition&) { return ok(); });
    QVERIFY(!n.ok());
    QVERIFY2(n.message().find("bad.jsonl:2: not a JSON object") != std::string::npos,
             n.message().c_str());
  }

  void visitorErrorStopsWithPosition() {
    std::string path = write("v.jsonl", "{\"a\":1}\n{\"b\":1}\n");
    auto n = data::read_jsonl(
        path, [](const nlohmann::json& r, const data::JsonlPosition&) -> Result<void> {
          if (!r.contains("a")) return fail("field a is missing");
          return ok();
        });
    QVERIFY(!n.ok());
    QVERIFY2(n.message().find("v.jsonl:2: field a is missing") != std::string::npos,
             n.message().c_str());
  }

  void missingFileSaysSo() {
    auto n =
        data::read_jsonl(m_dir.filePath("none.jsonl").toStdString(),
                         [](const nlohmann::json&, const data::JsonlPosition&) { return ok(); });
    QVERIFY(!n.ok());
    QVERIFY2(n.message().find("cannot open") != std::string::npos, n.message().c_str());
  }
};

QTEST_APPLESS_MAIN(TestJsonl)
#include "tst_jsonl.moc"
