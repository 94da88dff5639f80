// shardscope: the dashboard. main() only wires the application, the main window, the run
// control (stop requests) and the screenshot mode.
//   shardscope [--db PATH] [--launch] [EXP.toml]
//   shardscope --screenshot DIR [--db PATH] [--size WxH]   (no display needed)
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QIcon>
#include <QStatusBar>

#include <cstdio>
#include <cstring>

#include "app/shardscope/runcontrol.h"
#include "backend/store/runstore.h"
#include "spec/version.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/mainwindow.h"
#include "ui/screenshot.h"

namespace {

const char* const kUsage =
    "Usage: shardscope [--db PATH] [--launch] [EXP.toml]\n"
    "       shardscope --screenshot DIR [--db PATH] [--size WxH]\n"
    "The dashboard for sharded fine-tuning runs; shardscope-cli is its headless twin.\n"
    "  --db PATH|URL     run log to open: a SQLite file (default: the user's, as shardscope-cli\n"
    "                    uses) or a postgresql://user@host:port/db URL\n"
    "  --screenshot DIR  write DIR/{builder,runs,plots,compare,hosts}.png and DIR/index.json,\n"
    "                    then exit (0; 1 when the run log has no runs or DIR is not writable)\n"
    "  --size WxH        screenshot size in pixels (default 1600x1000)\n"
    "  --launch          launch EXP.toml as the builder's Launch does (a sweep when it has\n"
    "                    [search]); nothing is launched when it has validation errors\n"
    "  --version, -h/--help\n";

// Answered before QApplication exists, so they work on a machine without a display; a
// screenshot needs no display either, so it selects the offscreen platform up front.
int earlyArguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0) {
      std::printf("shardscope %s\n", shardscope::kVersion);
      return 0;
    }
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", kUsage);
      return 0;
    }
    if (std::strcmp(argv[i], "--screenshot") == 0) qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  return -1;
}

int screenshot(shardscope::ui::MainWindow& window, const QString& dir, const QString& size) {
  shardscope::ui::ScreenshotOptions options;
  options.dir = dir;
  if (!size.isEmpty()) {
    auto parsed = shardscope::ui::parseSize(size);
    if (!parsed) {
      std::fprintf(stderr, "shardscope: %s\n", parsed.message().c_str());
      return 2;
    }
    options.size = *parsed;
  }
  window.resize(options.size);
  window.show();
  auto index = shardscope::ui::writeScreenshots(window, options);
  if (!index) {
    std::fprintf(stderr, "shardscope: %s\n", index.message().c_str());
    return 1;
  }
  std::printf("screenshots of %s written to %s\n",
              qPrintable(index->value("runs_shown").toString()), qPrintable(dir));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int early = earlyArguments(argc, argv); early >= 0) return early;
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Shardscope"));
  QApplication::setApplicationVersion(QString::fromLatin1(shardscope::kVersion));
  QApplication::setOrganizationName(QStringLiteral("Shardscope"));
  QApplication::setDesktopFileName(QStringLiteral("shardscope"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/shardscope/shardscope.svg")));

  QCommandLineParser parser;
  const QCommandLineOption db(
      "db", "Run log to open: a SQLite file or a postgresql://user@host:port/db URL.", "PATH|URL");
  const QCommandLineOption shot("screenshot", "Write the panels' screenshots to DIR.", "DIR");
  const QCommandLineOption size("size", "Screenshot size (default 1600x1000).", "WxH");
  const QCommandLineOption launch("launch", "Launch EXP.toml as the builder's Launch does.");
  parser.addOptions({db, shot, size, launch});
  parser.addPositionalArgument("EXP.toml", "Experiment file to open in the builder.");
  if (!parser.parse(QApplication::arguments())) {
    std::fprintf(stderr, "shardscope: %s\n%s", qPrintable(parser.errorText()), kUsage);
    return 2;
  }
  if (parser.isSet(size)) {  // a usage error is reported before anything is opened
    if (auto parsed = shardscope::ui::parseSize(parser.value(size)); !parsed) {
      std::fprintf(stderr, "shardscope: %s\n", parsed.message().c_str());
      return 2;
    }
  }
  const QString dbPath =
      parser.isSet(db) ? parser.value(db) : shardscope::backend::RunStore::defaultPath();
  // The run log is opened (and its tables made) even when empty or new: a PostgreSQL one is
  // filled by other machines, and a file that does not exist yet (`--db new.db`, the default
  // path on a fresh account) is created, folder and all, for the runs this window launches. A
  // log of an older schema is migrated here, once: the panels read it read-only.
  if (!shardscope::backend::isPostgresSpec(dbPath)) QDir().mkpath(QFileInfo(dbPath).absolutePath());
  if (auto store = shardscope::backend::RunStore::open(dbPath); !store) {
    std::fprintf(stderr, "shardscope: %s\n", store.message().c_str());
    return 1;
  }
  shardscope::ui::MainWindow window;
  // The run lifecycle of this run log; shardscope-cli beside this executable supervises the
  // runs (and runs the sweeps) it starts.
  shardscope::backend::RunLifecycle::Settings lifecycle;
  lifecycle.dbPath = dbPath;
  lifecycle.runsRoot = shardscope::backend::RunLifecycle::runsRootFor(dbPath);
  lifecycle.supervisor = QApplication::applicationDirPath() + QStringLiteral("/shardscope-cli");
  lifecycle.trainerDir = QApplication::applicationDirPath();
  shardscope::app::RunControl control(lifecycle, 5);
  QObject::connect(&window, &shardscope::ui::MainWindow::stopRequested, &control,
                   &shardscope::app::RunControl::stop);
  QObject::connect(&window, &shardscope::ui::MainWindow::launchRequested, &control,
                   &shardscope::app::RunControl::launch);
  QObject::connect(window.builderPanel()->controller(),
                   &shardscope::ui::BuilderController::replanOnOomChanged, &control,
                   &shardscope::app::RunControl::setReplanOnOom);
  QObject::connect(&window, &shardscope::ui::MainWindow::resumeRequested, &control,
                   &shardscope::app::RunControl::resume);
  QObject::connect(&window, &shardscope::ui::MainWindow::resumeFromCheckpointRequested, &control,
                   &shardscope::app::RunControl::resumeFromCheckpoint);
  QObject::connect(&window, &shardscope::ui::MainWindow::trialRequested, &control,
                   &shardscope::app::RunControl::requestTrial);
  QObject::connect(&window, &shardscope::ui::MainWindow::sweepControlRequested, &control,
                   &shardscope::app::RunControl::steerSweep);
  QObject::connect(&window, &shardscope::ui::MainWindow::sweepAdoptRequested, &control,
                   &shardscope::app::RunControl::adoptSweep);
  QObject::connect(&window, &shardscope::ui::MainWindow::autotuneRequested, &control,
                   &shardscope::app::RunControl::autotune);
  QObject::connect(&control, &shardscope::app::RunControl::autotuneStarted, window.builderPanel(),
                   &shardscope::ui::BuilderPanel::autotuneStarted);
  QObject::connect(&control, &shardscope::app::RunControl::autotuneFailed, window.builderPanel(),
                   &shardscope::ui::BuilderPanel::autotuneFailed);
  QObject::connect(&window, &shardscope::ui::MainWindow::runLogOpened, &control,
                   &shardscope::app::RunControl::setRunLog);
  QObject::connect(&control, &shardscope::app::RunControl::message, &window,
                   [&window](const QString& text) { window.statusBar()->showMessage(text, 8000); });
  window.openRunLog(dbPath);
  if (parser.isSet(launch) && parser.positionalArguments().isEmpty()) {
    std::fprintf(stderr, "shardscope: --launch needs an EXP.toml to launch\n%s", kUsage);
    return 2;
  }
  if (!parser.positionalArguments().isEmpty()) {
    if (auto opened = window.openExperiment(parser.positionalArguments().first()); !opened) {
      std::fprintf(stderr, "shardscope: %s\n", opened.message().c_str());
      if (parser.isSet(launch)) return 2;
    } else if (parser.isSet(launch)) {
      // The builder's own Launch: refused (and shown on the fields) while it has issues.
      auto* builder = window.builderPanel()->controller();
      builder->validateNow();
      if (!builder->launchAllowed()) {
        std::fprintf(stderr, "shardscope: %s has validation errors; nothing launched\n",
                     qPrintable(parser.positionalArguments().first()));
      }
      builder->requestLaunch();
    }
  }
  if (parser.isSet(shot)) return screenshot(window, parser.value(shot), parser.value(size));
  window.show();
  return QApplication::exec();
}
