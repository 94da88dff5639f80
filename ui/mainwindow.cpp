#include "ui/mainwindow.h"

#include <QStatusBar>

#include "ui/plot/curveplot.h"

namespace shardscope::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), m_curvePlot(new CurvePlot(this)) {
  setWindowTitle(QStringLiteral("Shardscope"));
  m_curvePlot->setAxisLabels(tr("step"), tr("loss"));
  setCentralWidget(m_curvePlot);
  statusBar()->showMessage(tr("No run log opened yet"));
  resize(1000, 640);
}

}  // namespace shardscope::ui
