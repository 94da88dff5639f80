#include <QTest>

#include "spec/status.h"

using namespace shardscope::spec;

class TestStatus : public QObject {
  Q_OBJECT

 private slots:
  void namesRoundTrip() {
    const char* names[] = {"queued", "running", "complete", "stopped",
                           "pruned", "failed",  "oom",      "infeasible"};
    for (const char* name : names) {
      auto status = parse_run_status(name);
      QVERIFY2(status.has_value(), name);
      QCOMPARE(std::string(to_string(*status)), std::string(name));
    }
    QVERIFY(!parse_run_status("finished").has_value());
    QCOMPARE(std::string(to_string(ErrorKind::peer_lost)), std::string("peer_lost"));
    QCOMPARE(parse_done_status("stopped"), std::optional<DoneStatus>(DoneStatus::stopped));
  }

  void finalStatuses() {
    QVERIFY(!is_final(RunStatus::queued));
    QVERIFY(!is_final(RunStatus::running));
    QVERIFY(is_final(RunStatus::oom));
    QVERIFY(is_final(RunStatus::infeasible));
  }
};

QTEST_APPLESS_MAIN(TestStatus)
#include "tst_status.moc"
