#include "ui/plots/plotcontrols.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>

#include <cmath>

#include "ui/widgets/smoothing.h"

namespace shardscope::ui {

namespace {
constexpr int kSliderScale = 1000;  // slider units per 1.0 of weight
}  // namespace

PlotControls::PlotControls(QWidget* parent)
    : QWidget(parent),
      m_smoothing(new QSlider(Qt::Horizontal, this)),
      m_smoothingValue(new QLabel(this)),
      m_xAxis(new QComboBox(this)),
      m_logX(new QCheckBox(tr("log x"), this)),
      m_logY(new QCheckBox(tr("log y"), this)) {
  m_smoothing->setObjectName(QStringLiteral("smoothingSlider"));
  m_smoothing->setRange(0, int(std::lround(kMaxSmoothing * kSliderScale)));
  m_smoothing->setPageStep(100);
  m_smoothing->setMinimumWidth(140);
  m_smoothing->setToolTip(
      tr("Smoothing: an exponential moving average with bias correction, as TensorBoard's "
         "(0: off). The raw curve stays, faint, behind the smoothed one; the stored values "
         "never change."));
  m_smoothingValue->setMinimumWidth(QFontMetrics(font()).horizontalAdvance("0.000") + 4);
  m_smoothingValue->setText(QStringLiteral("0"));
  m_xAxis->setObjectName(QStringLiteral("xAxisPicker"));
  for (const XAxis axis : xAxes()) m_xAxis->addItem(xAxisName(axis), int(axis));
  m_xAxis->setToolTip(
      tr("What the charts' x axis counts. Tokens seen is an estimate: the trainer reports "
         "tokens per second, so each run's tokens per step is taken from tokens/s and the time "
         "between its steps."));
  m_logX->setObjectName(QStringLiteral("logX"));
  m_logY->setObjectName(QStringLiteral("logY"));
  m_logX->setToolTip(tr("Logarithmic x axis (points at x <= 0 are not drawn)"));
  m_logY->setToolTip(tr("Logarithmic y axis (points at y <= 0 are not drawn)"));

  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(new QLabel(tr("Smoothing"), this));
  layout->addWidget(m_smoothing);
  layout->addWidget(m_smoothingValue);
  layout->addSpacing(12);
  layout->addWidget(new QLabel(tr("X axis"), this));
  layout->addWidget(m_xAxis);
  layout->addSpacing(12);
  layout->addWidget(m_logX);
  layout->addWidget(m_logY);
  layout->addStretch(1);

  connect(m_smoothing, &QSlider::valueChanged, this, [this] {
    m_smoothingValue->setText(QString::number(smoothing(), 'g', 3));
    emit smoothingChanged(smoothing());
  });
  connect(m_xAxis, &QComboBox::currentIndexChanged, this, [this] { emit xAxisChanged(xAxis()); });
  for (QCheckBox* box : {m_logX, m_logY})
    connect(box, &QCheckBox::toggled, this, [this] { emit logScaleChanged(logX(), logY()); });
}

double PlotControls::smoothing() const { return double(m_smoothing->value()) / kSliderScale; }

XAxis PlotControls::xAxis() const { return XAxis(m_xAxis->currentData().toInt()); }

bool PlotControls::logX() const { return m_logX->isChecked(); }

bool PlotControls::logY() const { return m_logY->isChecked(); }

}  // namespace shardscope::ui
