#include "ui/timeline/timelinepanel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSplitter>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/data/runlog.h"
#include "ui/timeline/timelineview.h"
#include "ui/timeline/unitview.h"

namespace shardscope::ui {

TimelinePanel::TimelinePanel(RunLog& runLog, QWidget* parent) : QWidget(parent), m_runLog(runLog) {
  m_verdict = new QLabel(tr("Select a run to see where its steps' time went."), this);
  m_verdict->setObjectName(QStringLiteral("timelineVerdict"));
  m_verdict->setWordWrap(true);
  m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_fit = new QToolButton(this);
  m_fit->setText(tr("Fit"));
  m_fit->setToolTip(tr("Show every step (and follow a live run again)"));
  QStringList legend;
  for (int p = TimelineView::kPhaseCount - 1; p >= 0; --p) {
    legend << QStringLiteral("<span style=\"color:%1\">&#9632;</span>&nbsp;%2")
                  .arg(TimelineView::phaseColor(p).name(), TimelineView::phaseName(p));
  }
  auto* legendLabel = new QLabel(legend.join(QStringLiteral("&nbsp;&nbsp; ")), this);
  legendLabel->setObjectName(QStringLiteral("timelineLegend"));
  legendLabel->setToolTip(
      tr("Each bar is one step (zoomed out: the mean of the steps in a pixel column, with a tick "
         "at their highest wall time). Wheel: zoom; drag: pan; double-click: the step."));
  m_view = new TimelineView(this);
  auto* bar = new QHBoxLayout;
  bar->addWidget(m_fit);
  bar->addWidget(legendLabel, 1);
  m_unitLabel = new QLabel(tr("Double-click a step to see its FSDP units per rank."), this);
  m_unitLabel->setObjectName(QStringLiteral("timelineUnitLabel"));
  m_unitLabel->setWordWrap(true);
  m_unitLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_unitView = new UnitView(this);
  m_unitView->setVisible(false);
  auto* detail = new QWidget(this);
  auto* detailLayout = new QVBoxLayout(detail);
  detailLayout->setContentsMargins(0, 0, 0, 0);
  detailLayout->addWidget(m_unitLabel);
  detailLayout->addWidget(m_unitView, 1);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_view);
  split->addWidget(detail);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_verdict);
  layout->addLayout(bar);
  layout->addWidget(split, 1);
  connect(m_fit, &QToolButton::clicked, m_view, &TimelineView::fit);
  connect(m_view, &TimelineView::stepActivated, this, &TimelinePanel::stepActivated);
  connect(m_view, &TimelineView::stepActivated, this, [this](qint64 runId, qint64 step, int) {
    m_unitLabel->setText(tr("Reading step %1's per-unit trace...").arg(step));
    m_runLog.loadUnitStep(runId, step);
  });
  connect(&m_runLog, &RunLog::phasesLoaded, this, &TimelinePanel::onPhases);
  connect(&m_runLog, &RunLog::unitStepLoaded, this, &TimelinePanel::onUnitStep);
}

void TimelinePanel::setRun(qint64 runId) {
  if (runId == m_runId) return;
  m_runId = runId;
  m_loaded = false;
  m_view->clear();
  m_unitView->setVisible(false);
  m_unitLabel->setText(tr("Double-click a step to see its FSDP units per rank."));
  m_verdict->setText(runId < 0 ? tr("Select a run to see where its steps' time went.")
                               : tr("Reading the run's phases..."));
  m_runLog.watchPhases(runId);
}

void TimelinePanel::onUnitStep(const UnitStepData& data) {
  if (data.runId != m_runId) return;  // an earlier selection's read
  if (data.found) {
    m_unitLabel->setText(tr("Step %1 per FSDP unit: gathers, compute and reduce-scatters per rank "
                            "(darker: waited on; hover for bytes and bandwidth)")
                             .arg(data.step));
    m_unitView->showStep(data.detail);
  } else {
    m_unitLabel->setText(data.message);
  }
  m_unitView->setVisible(data.found);
  emit unitStepShown();
}

void TimelinePanel::onPhases(const PhasesDelta& delta) {
  if (delta.runId != m_runId) return;  // an earlier selection's read
  m_view->apply(delta);
  m_verdict->setText(delta.verdict);
  m_loaded = true;
  emit loaded();
}

}  // namespace shardscope::ui
