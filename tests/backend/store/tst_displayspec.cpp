// backend::displaySpec, the one function that makes a run log's spec fit to show or store: a
// PostgreSQL password goes in every form libpq takes it (the URL's user information, `password=`
// in its parameters, percent-encoded or not, a multi-host URL that QUrl cannot parse, a key=value
// connection string, the SSL key's `sslpassword`), and everything else stays as written.
#include <QTest>

#include "backend/store/db.h"

using shardscope::backend::displaySpec;

class TestDisplaySpec : public QObject {
  Q_OBJECT

 private slots:
  void passwordIsStrippedInEveryForm_data() {
    QTest::addColumn<QString>("spec");
    QTest::addColumn<QString>("shown");
    QTest::newRow("userinfo") << "postgresql://alice:s3cret@db.lab:5432/runs"
                              << "postgresql://alice@db.lab:5432/runs";
    QTest::newRow("userinfo, postgres://") << "postgres://alice:s3cret@db.lab/runs"
                                           << "postgres://alice@db.lab/runs";
    QTest::newRow("userinfo, no database") << "postgresql://alice:s3cret@db.lab"
                                           << "postgresql://alice@db.lab";
    QTest::newRow("userinfo, ? and : in the password") << "postgresql://alice:s3?cr:et@db.lab/runs"
                                                       << "postgresql://alice@db.lab/runs";
    QTest::newRow("userinfo, unencoded / in the password")
        << "postgresql://alice:s3/cret@db.lab/runs"
        << "postgresql://alice@db.lab/runs";
    QTest::newRow("query") << "postgresql://alice@db.lab/runs?password=s3cret&sslmode=verify-full"
                           << "postgresql://alice@db.lab/runs?sslmode=verify-full";
    QTest::newRow("query, last") << "postgresql://db.lab/runs?user=alice&password=s3cret"
                                 << "postgresql://db.lab/runs?user=alice";
    QTest::newRow("query, only") << "postgresql://alice@db.lab/runs?password=s3cret"
                                 << "postgresql://alice@db.lab/runs";
    QTest::newRow("query, percent-encoded key")
        << "postgresql://alice@db.lab/runs?pass%77ord=s3cret"
        << "postgresql://alice@db.lab/runs";
    QTest::newRow("query, sslpassword")
        << "postgresql://alice@db.lab/runs?sslpassword=s3cret&sslcert=/c.pem"
        << "postgresql://alice@db.lab/runs?sslcert=/c.pem";
    QTest::newRow("multi-host userinfo")
        << "postgresql://alice:s3cret@h1,h2:5433/runs?target_session_attrs=read-write"
        << "postgresql://alice@h1,h2:5433/runs?target_session_attrs=read-write";
    QTest::newRow("multi-host query") << "postgresql://h1:5432,h2/runs?user=alice&password=s3cret"
                                      << "postgresql://h1:5432,h2/runs?user=alice";
    QTest::newRow("both") << "postgresql://alice:s3cret@h1,h2/runs?password=s3cret"
                          << "postgresql://alice@h1,h2/runs";
    QTest::newRow("key=value") << "host=db.lab password=s3cret user=alice dbname=runs"
                               << "host=db.lab user=alice dbname=runs";
    QTest::newRow("key=value, spaces around =") << "host=db.lab password = s3cret user=alice"
                                                << "host=db.lab user=alice";
    QTest::newRow("key=value, quoted") << "host=db.lab password='s3cret and \\' more' user=alice"
                                       << "host=db.lab user=alice";
    QTest::newRow("key=value, first") << "password=s3cret host=db.lab"
                                      << "host=db.lab";
    QTest::newRow("key=value, broken after the password") << "host=db.lab junk password=s3cret"
                                                          << "host=db.lab junk…";
  }
  void passwordIsStrippedInEveryForm() {
    QFETCH(QString, spec);
    QFETCH(QString, shown);
    const QString got = displaySpec(spec);
    QCOMPARE(got, shown);
    QVERIFY2(!got.contains("s3"), qPrintable(got));
    QCOMPARE(displaySpec(got), got);  // stripping twice changes nothing
  }

  void everythingElseStaysAsWritten_data() {
    QTest::addColumn<QString>("spec");
    QTest::newRow("sqlite file") << "/home/alice/runs.db";
    QTest::newRow("relative file") << "runs/new.db";
    QTest::newRow("url without password") << "postgresql://alice@db.lab:5432/runs";
    QTest::newRow("url with parameters") << "postgresql://db.lab/runs?sslmode=verify-full&user=a";
    QTest::newRow("multi-host without password") << "postgresql://alice@h1:5432,h2:5433/runs";
    QTest::newRow("key=value without password") << "host=db.lab user=alice";
  }
  void everythingElseStaysAsWritten() {
    QFETCH(QString, spec);
    QCOMPARE(displaySpec(spec), spec);
  }
};

QTEST_GUILESS_MAIN(TestDisplaySpec)
#include "tst_displayspec.moc"
