// `import` through the real binary: a clean import writes the experiment (which `estimate`
// then reads) and exits 0; an unknown or contradictory key prints the report, writes nothing and
// exits 2; an existing output is refused without --force; --json has the documented fields.
#include <QFile>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

#include "tests/app/clitest.h"
#include "tests/support/paths.h"

using clitest::cli;
using clitest::documentedFields;
using clitest::json;
using clitest::Run;
using clitest::sortedKeys;

namespace {

QString fixture(const QString& name) {
  return shardscope::testing::sourceDir() + "/tests/backend/import/fixtures/" + name;
}

}  // namespace

class TestCliImport : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QString path(const QString& name) const { return m_dir.filePath(name); }

 private slots:
  void cleanImportWritesAnExperimentTheOtherVerbsRead() {
    const QString out = path("fsdp2.toml");
    const Run r = cli({"import", "accelerate", fixture("accelerate_fsdp2.yaml"), "-o", out});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QVERIFY(QFile::exists(out));
    QVERIFY2(r.out.contains("fsdp_config.fsdp_reshard_after_forward = false -> shard.strategy = "
                            "\"SHARD_GRAD_OP\""),
             qPrintable(r.out));
    QVERIFY(r.out.contains("wrote " + out));
    // The written file is an experiment the other verbs take once its data is named.
    QVERIFY(clitest::writeAll(path("train.jsonl"), "{\"input_ids\": [1, 2, 3]}\n"));
    const Run est = cli({"estimate", out, "--set", "data.train_path=" + path("train.jsonl")});
    QVERIFY2(est.exitCode == 0, qPrintable(est.out + est.err));
    QVERIFY(est.out.contains("valid for 4 rank(s)"));
  }

  void existingOutputIsRefusedWithoutForce() {
    const QString out = path("again.toml");
    QVERIFY(clitest::writeAll(out, "# mine\n"));
    const Run r = cli({"import", "deepspeed", fixture("ds_zero3.json"), "-o", out});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(out + ": already exists"), qPrintable(r.err));
    QCOMPARE(clitest::readAll(out), QStringLiteral("# mine\n"));
    QCOMPARE(cli({"import", "deepspeed", fixture("ds_zero3.json"), "-o", out, "--force"}).exitCode,
             0);
    QVERIFY(clitest::readAll(out).contains("strategy = \"FULL_SHARD\""));
  }

  void contradictoryKeysExit2AndWriteNothing() {
    const QString out = path("conflict.toml");
    const Run r =
        cli({"import", "accelerate", fixture("accelerate_legacy_conflict.yaml"), "-o", out});
    QCOMPARE(r.exitCode, 2);
    QVERIFY(!QFile::exists(out));
    QVERIFY2(r.out.contains("accelerate_legacy_conflict.yaml: fsdp_config."), qPrintable(r.out));
    QVERIFY(r.out.contains("nothing written"));
  }

  void unknownKeyExit2NamesFileAndKey() {
    const QString out = path("unknown.toml");
    const Run r =
        cli({"--json", "import", "accelerate", fixture("accelerate_unknown.yaml"), "-o", out});
    QCOMPARE(r.exitCode, 2);
    QVERIFY(!QFile::exists(out));
    const auto o = json(r.out);
    QCOMPARE(o.value("ok").toBool(), false);
    QVERIFY(o.value("written").isNull());
    bool named = false;
    for (const auto& e : o.value("entries").toArray()) {
      named |= e.toObject().value("key").toString() == "mixed_precison" &&
               e.toObject().value("outcome").toString() == "error";
    }
    QVERIFY2(named, qPrintable(r.out));
  }

  // Nine levels of ten aliases (under 1 KB, 10^9 nodes once expanded): before the bound the
  // import ran for minutes; it must end at once, exit 1 and name the file and the limit.
  void aliasBombEndsAtOnceNamingTheFile() {
    QByteArray text = "distributed_type: NO\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 9; ++i) {
      text += "l" + QByteArray::number(i) + ": &l" + QByteArray::number(i) + " [";
      for (int k = 0; k < 10; ++k) text += (k ? ", *l" : "*l") + QByteArray::number(i - 1);
      text += "]\n";
    }
    QVERIFY(text.size() < 1024);
    const QString bomb = path("bomb.yaml");
    QVERIFY(clitest::writeAll(bomb, text));
    const Run r = cli({"import", "accelerate", bomb, "-o", path("bomb.toml")},
                      QProcessEnvironment::systemEnvironment(), 20000);
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains(bomb + ": expands to more than 100000 nodes"), qPrintable(r.err));
    QVERIFY(!QFile::exists(path("bomb.toml")));
  }

  void unreadableFileExits1() {
    const Run r =
        cli({"import", "accelerate", fixture("accelerate_broken.yaml"), "-o", path("broken.toml")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("accelerate_broken.yaml:"), qPrintable(r.err));
  }

  void jsonHasTheDocumentedFields() {
    const Run r =
        cli({"--json", "import", "hf-trainer", fixture("hf_args.json"), "-o", path("hf.toml")});
    QCOMPARE(r.exitCode, 0);
    const auto o = json(r.out);
    QCOMPARE(sortedKeys(o), documentedFields("import"));
    const auto first = o.value("entries").toArray().first().toObject();
    QVERIFY(first.contains("key") && first.contains("outcome") && first.contains("detail"));
  }
};

QTEST_GUILESS_MAIN(TestCliImport)
#include "tst_cli_import.moc"
