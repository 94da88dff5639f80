// MainWindow: the dashboard's top-level window. For now one curve plot and a status line; the
// run table, experiment builder and trial comparison arrive as panels with their own controllers.
#pragma once

#include <QMainWindow>

namespace shardscope::ui {

class CurvePlot;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  CurvePlot* curvePlot() const { return m_curvePlot; }

 private:
  CurvePlot* m_curvePlot = nullptr;
};

}  // namespace shardscope::ui
