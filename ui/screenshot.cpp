#include "ui/screenshot.h"

#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QTimer>
#include <QWidget>

#include "ui/compare/comparepanel.h"
#include "ui/data/runlog.h"
#include "ui/mainwindow.h"

Q_LOGGING_CATEGORY(lcScreenshot, "shardscope.ui.screenshot")

namespace shardscope::ui {

namespace {

// Runs the event loop until `done()` holds or the deadline passes; true when it held.
template <class Predicate>
bool waitFor(MainWindow& window, const QDeadlineTimer& deadline, Predicate done) {
  if (done()) return true;
  QEventLoop loop;
  QTimer tick;
  QObject::connect(&window, &MainWindow::loadedChanged, &loop, [&] {
    if (done()) loop.quit();
  });
  QObject::connect(&tick, &QTimer::timeout, &loop, [&] {
    if (done() || deadline.hasExpired()) loop.quit();
  });
  tick.start(50);
  loop.exec();
  return done();
}

Result<void> writePanel(QWidget* panel, const QString& path, QSize size) {
  const QSize old = panel->size();
  panel->resize(size);
  QImage image = panel->grab(QRect(QPoint(0, 0), size)).toImage();
  panel->resize(old);
  if (!image.save(path, "PNG")) {
    return fail(path.toStdString() + ": could not write the screenshot (may this user write to " +
                QFileInfo(path).absolutePath().toStdString() + "?)");
  }
  return ok();
}

}  // namespace

Result<QSize> parseSize(const QString& text) {
  const QStringList parts = text.toLower().split(QLatin1Char('x'));
  bool okW = false;
  bool okH = false;
  const int w = parts.value(0).toInt(&okW);
  const int h = parts.size() == 2 ? parts.value(1).toInt(&okH) : 0;
  if (!okW || !okH || w < 200 || h < 150 || w > 8000 || h > 8000) {
    return fail("--size: \"" + text.toStdString() +
                "\" is not WIDTHxHEIGHT in pixels between 200x150 and 8000x8000 (e.g. 1600x1000)");
  }
  return QSize(w, h);
}

Result<QJsonObject> writeScreenshots(MainWindow& window, const ScreenshotOptions& options) {
  if (!QDir().mkpath(options.dir)) {
    return fail(options.dir.toStdString() + ": cannot create the screenshot folder");
  }
  const QDeadlineTimer deadline(options.timeoutMs);
  if (!waitFor(window, deadline, [&] { return window.runCount() >= 0; })) {
    return fail(window.runLog().path().toStdString() +
                ": the run log did not load within the time limit (is it a Shardscope run log?)");
  }
  if (window.runCount() == 0) {
    return fail(window.runLog().path().toStdString() +
                ": the run log has no runs to show; start one first (shardscope-cli run "
                "examples/demo.toml)");
  }
  const QString shown = window.selectShowcase();
  if (!waitFor(window, deadline, [&] { return window.isLoaded(); })) {
    return fail("the panels did not finish loading within " +
                std::to_string(options.timeoutMs / 1000) + " s");
  }
  QJsonArray panels;
  for (const QString& name : MainWindow::panelNames()) {
    const QString file = name + QStringLiteral(".png");
    if (auto written =
            writePanel(window.panel(name), QDir(options.dir).filePath(file), options.size);
        !written) {
      return written.error();
    }
    panels.append(QJsonObject{{"name", name}, {"file", file}});
  }
  const SweepData& sweep = window.comparePanel()->sweep();
  QJsonObject index{
      {"db", window.runLog().path()},
      {"runs_shown", shown},
      {"run_count", window.runCount()},
      {"experiment_id", sweep.experimentId >= 0 ? QJsonValue(sweep.experimentId) : QJsonValue()},
      {"trials", static_cast<int>(sweep.trials.size())},
      {"size", QStringLiteral("%1x%2").arg(options.size.width()).arg(options.size.height())},
      {"written_at", QDateTime::currentDateTimeUtc().toString(Qt::ISODate)},
      {"panels", panels}};
  QFile out(QDir(options.dir).filePath(QStringLiteral("index.json")));
  if (!out.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      out.write(QJsonDocument(index).toJson()) < 0) {
    return fail(out.fileName().toStdString() +
                ": cannot write: " + out.errorString().toStdString());
  }
  return index;
}

}  // namespace shardscope::ui
