// The run log a CLI test owns, for the tests that link the backend (teststore.h opens a
// PostgreSQL database when SHARDSCOPE_TEST_DB names a server).
#pragma once

#include <QString>
#include <QStringList>
#include <QTemporaryDir>

#include "tests/app/clitest.h"
#include "tests/support/teststore.h"

namespace clitest {

/// A test's own run log (SQLite in a temporary folder, or a fresh database on the PostgreSQL
/// server of SHARDSCOPE_TEST_DB: teststore.h) and shardscope-cli run against it; a test class
/// derives from it (after QObject) and calls openRunLog() in initTestCase().
class OnRunLog {
 protected:
  QTemporaryDir m_dir;
  QString m_db;

  /// Makes the run log; false when the temporary folder could not be made.
  bool openRunLog() {
    if (!m_dir.isValid()) return false;
    m_db = shardscope::testing::storeSpec(m_dir.path(), "runs.db");
    return true;
  }

  /// shardscope-cli --db RUNLOG args..., to its end.
  Run cli(const QStringList& args) const { return clitest::cli(QStringList{"--db", m_db} + args); }
};

}  // namespace clitest
