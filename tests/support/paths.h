// Where a test finds the checkout, the build tree and the programs it runs: environment variables
// that CTest sets on the test (shardscope_add_test in cmake/ShardscopeTest.cmake), never compile
// definitions. A path compiled in would make each clone folder compile a different unit, which
// ccache cannot share between clones (CI's fresh clone recompiled every test that used one); read
// at run time, a test unit compiles the same in any folder (docs/build-and-tests.md, "Caches").
#pragma once

#include <QByteArray>
#include <QFile>
#include <QFileInfo>
#include <QString>
#include <QtGlobal>

namespace shardscope::testing {

/// The path in the environment variable `name`; `what` says what it names, for the message. Unset
/// or empty ends the test with a fatal error (qFatal: it also works before main, for a test's
/// constants) that names the variable and the fix.
inline QString envPath(const char* name, const char* what) {
  QString value = qEnvironmentVariable(name);
  if (value.isEmpty()) {
    const QByteArray test =
        QFileInfo(QFile::symLinkTarget(QStringLiteral("/proc/self/exe"))).fileName().toLocal8Bit();
    qFatal(
        "%s: the environment variable %s is not set. CTest sets it: run the test in the build "
        "tree with `ctest -R %s`, or set %s to %s (`ctest -R %s --show-only=json-v1` shows the "
        "test's environment).",
        test.constData(), name, test.constData(), name, what, test.constData());
  }
  return value;
}

/// The checkout's root folder (the source tree).
inline QString sourceDir() {
  return envPath("SHARDSCOPE_TEST_SOURCE_DIR", "the checkout's root folder");
}

/// The build tree the test was built in (build/).
inline QString binaryDir() {
  return envPath("SHARDSCOPE_TEST_BINARY_DIR", "the build tree the test was built in");
}

}  // namespace shardscope::testing
