// A small dashboard-like process for tst_guithread: a QGuiApplication that makes one backend
// call (a run-log write or a launcher) from the place named on its command line:
//   guithread_probe store|launcher gui|worker|startup DB
// It prints "survived" and exits 0 when the call went through; the guard aborts it otherwise.
#include <QGuiApplication>
#include <QThread>
#include <QTimer>

#include <cstdio>

#include "backend/launch/launchers.h"
#include "backend/store/runstore.h"

using namespace shardscope;

namespace {

bool call(const QString& action, const QString& db) {
  if (action == QLatin1String("launcher")) return backend::makeLauncher("local").ok();
  auto store = backend::RunStore::open(db);
  if (!store) return false;
  return (*store)->createExperiment({0, "probe", "probe.toml", "[train]\n", 0}).get().ok();
}

void report(bool done) {
  std::printf("%s\n", done ? "survived" : "call failed");
  std::fflush(stdout);
  QCoreApplication::exit(done ? 0 : 1);
}

}  // namespace

int main(int argc, char** argv) {
  QGuiApplication app(argc, argv);
  const QStringList args = QGuiApplication::arguments();
  if (args.size() != 4) return 2;
  const QString action = args[1];
  const QString where = args[2];
  const QString db = args[3];
  if (where == QLatin1String("startup")) {  // before the event loop, as main() migrates the log
    const bool done = call(action, db);
    QTimer::singleShot(0, &app, [done] { report(done); });
  } else if (where == QLatin1String("gui")) {
    QTimer::singleShot(0, &app, [action, db] { report(call(action, db)); });
  } else {
    QThread* worker = QThread::create([action, db] {
      const bool done = call(action, db);
      QMetaObject::invokeMethod(qApp, [done] { report(done); });
    });
    QObject::connect(worker, &QThread::finished, worker, &QObject::deleteLater);
    worker->start();
  }
  return QGuiApplication::exec();
}
