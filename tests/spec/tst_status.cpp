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

  // Every kind reads back from its name, and the message that lists them is built from the one
  // list, so a new kind (disk_full) is accepted and named without a second list to update.
  void errorKinds() {
    for (const char* name : {"oom", "peer_lost", "config", "data", "io", "disk_full", "internal"}) {
      auto kind = parse_error_kind(name);
      QVERIFY2(kind.has_value(), name);
      QCOMPARE(std::string(to_string(*kind)), std::string(name));
    }
    QCOMPARE(error_kind_names(),
             std::string("oom, peer_lost, config, data, io, disk_full or internal"));
    QVERIFY(!parse_error_kind("enospc").has_value());
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
