// The main window as the window tests open it: shown on the real (or offscreen) display, over a
// run log (often runlogfixture.h's sweep), polling every 50 ms, with every run loaded.
#pragma once

#include <QAbstractItemModel>
#include <QString>
#include <QStringList>
#include <QTest>
#include <QTreeView>

#include <memory>

#include "ui/mainwindow.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"

namespace shardscope::testing {

/// The main window, shown and exposed, on the run log `db` once it has loaded `runs` runs within
/// `waitMs`; nullptr, after a warning saying which step did not happen, otherwise.
inline std::unique_ptr<ui::MainWindow> openMainWindow(const QString& db, int runs, int waitMs) {
  auto window = std::make_unique<ui::MainWindow>(nullptr, 50);
  window->show();
  if (!QTest::qWaitForWindowExposed(window.get())) {
    qWarning("the main window was not exposed");
    return nullptr;
  }
  window->openRunLog(db);
  if (!QTest::qWaitFor([&] { return window->isLoaded() && window->runCount() == runs; }, waitMs)) {
    qWarning("%s: %d runs loaded after %d ms, %d expected", qPrintable(db), window->runCount(),
             waitMs, runs);
    return nullptr;
  }
  return window;
}

/// The names of the rows the runs table shows (after its filters), sorted.
inline QStringList visibleRunNames(ui::RunsPanel* runs) {
  QStringList names;
  QAbstractItemModel* view = runs->view()->model();
  for (int row = 0; row < view->rowCount(); ++row)
    names << view->index(row, ui::RunTableModel::NameCol).data().toString();
  names.sort();
  return names;
}

}  // namespace shardscope::testing
