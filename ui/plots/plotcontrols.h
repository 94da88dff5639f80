// The row above the Plots panel's charts: smoothing (a slider, 0 .. 0.999, TensorBoard's
// weight), the x axis (step, wall time, relative time, tokens seen) and log scale per axis.
// It only says what the user chose; PlotsPanel applies it to every chart.
#pragma once

#include <QWidget>

#include "ui/plots/plotaxes.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QSlider;

namespace shardscope::ui {

class PlotControls : public QWidget {
  Q_OBJECT

 public:
  explicit PlotControls(QWidget* parent = nullptr);

  /// The smoothing weight, slider / 1000 (0: off).
  double smoothing() const;
  XAxis xAxis() const;
  bool logX() const;
  bool logY() const;

  QSlider* smoothingSlider() const { return m_smoothing; }
  QComboBox* xAxisPicker() const { return m_xAxis; }
  QCheckBox* logXBox() const { return m_logX; }
  QCheckBox* logYBox() const { return m_logY; }

 signals:
  void smoothingChanged(double weight);
  void xAxisChanged(shardscope::ui::XAxis axis);
  void logScaleChanged(bool x, bool y);

 private:
  QSlider* m_smoothing = nullptr;
  QLabel* m_smoothingValue = nullptr;
  QComboBox* m_xAxis = nullptr;
  QCheckBox* m_logX = nullptr;
  QCheckBox* m_logY = nullptr;
};

}  // namespace shardscope::ui
