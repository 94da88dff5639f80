// Screenshots of every panel for docs, tests and bug reports (`shardscope --screenshot DIR`).
// The set is fixed: DIR/builder.png, runs.png, plots.png, compare.png, hosts.png (each panel
// rendered alone at the requested size) and DIR/index.json naming what is shown.
#pragma once

#include <QJsonObject>
#include <QSize>
#include <QString>

#include "spec/result.h"

namespace shardscope::ui {

class MainWindow;

struct ScreenshotOptions {
  QString dir;
  QSize size{1600, 1000};
  int timeoutMs = 60000;  ///< generous wait for every panel's data
};

/// Waits until `window` (with a run log opened) has loaded every panel, picks what to show
/// (MainWindow::selectShowcase), waits again and writes the set. Fails when the run log has no
/// runs, DIR cannot be written, or loading does not finish in time. Returns index.json's content.
[[nodiscard]] Result<QJsonObject> writeScreenshots(MainWindow& window,
                                                   const ScreenshotOptions& options);

/// Parses "1600x1000".
[[nodiscard]] Result<QSize> parseSize(const QString& text);

}  // namespace shardscope::ui
