#include "ui/timeline/timelinepanel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/data/runlog.h"
#include "ui/timeline/timelineview.h"

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
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_verdict);
  layout->addLayout(bar);
  layout->addWidget(m_view, 1);
  connect(m_fit, &QToolButton::clicked, m_view, &TimelineView::fit);
  connect(m_view, &TimelineView::stepActivated, this, &TimelinePanel::stepActivated);
  connect(&m_runLog, &RunLog::phasesLoaded, this, &TimelinePanel::onPhases);
}

void TimelinePanel::setRun(qint64 runId) {
  if (runId == m_runId) return;
  m_runId = runId;
  m_loaded = false;
  m_view->clear();
  m_verdict->setText(runId < 0 ? tr("Select a run to see where its steps' time went.")
                               : tr("Reading the run's phases..."));
  m_runLog.watchPhases(runId);
}

void TimelinePanel::onPhases(const PhasesDelta& delta) {
  if (delta.runId != m_runId) return;  // an earlier selection's read
  m_view->apply(delta);
  m_verdict->setText(delta.verdict);
  m_loaded = true;
  emit loaded();
}

}  // namespace shardscope::ui
