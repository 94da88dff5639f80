#include "ui/samples/samplespanel.h"

#include <QAction>
#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QKeyEvent>
#include <QLabel>
#include <QMenu>
#include <QTableView>
#include <QVBoxLayout>

#include "ui/data/runlog.h"
#include "ui/samples/samplesdelegate.h"
#include "ui/samples/samplesmodel.h"

namespace shardscope::ui {

SamplesPanel::SamplesPanel(RunLog& runLog, QWidget* parent)
    : QWidget(parent),
      m_runLog(runLog),
      m_model(new SamplesModel(this)),
      m_filter(new SamplesFilter(this)),
      m_delegate(new SamplesDelegate(this)),
      m_view(new QTableView(this)) {
  m_filter->setSourceModel(m_model);
  m_view->setObjectName(QStringLiteral("samplesView"));
  m_view->setModel(m_filter);
  m_view->setItemDelegate(m_delegate);
  m_view->setWordWrap(false);
  m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_view->setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
  m_view->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
  // Fixed sizes: a view of hundreds of rows and dozens of columns never measures its cells.
  m_view->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  m_view->verticalHeader()->setDefaultSectionSize(m_delegate->rowHeight(m_view->font()));
  m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  m_view->horizontalHeader()->setDefaultSectionSize(260);
  m_view->horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);

  m_summary = new QLabel(noRunText(), this);
  m_summary->setObjectName(QStringLiteral("samplesSummary"));
  m_summary->setWordWrap(true);
  m_changed = new QCheckBox(tr("Changed"), this);
  m_changed->setToolTip(tr("Only probes whose answer differs from the column to its left"));
  m_wrong = new QCheckBox(tr("Wrong"), this);
  m_wrong->setToolTip(tr("Only probes answered wrong (exact match 0 against the reference)"));
  auto* legend = new QLabel(
      tr("<span style=\"background:%1\">&nbsp;changed&nbsp;</span>&nbsp; "
         "<span style=\"color:%2; text-decoration:underline\">not in the reference</span>")
          .arg(SamplesModel::changedFormat().background().color().name(),
               SamplesModel::wrongFormat().foreground().color().name()),
      this);
  auto* bar = new QHBoxLayout;
  bar->addWidget(m_changed);
  bar->addWidget(m_wrong);
  bar->addWidget(legend, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_summary);
  layout->addLayout(bar);
  layout->addWidget(m_view, 1);

  connect(m_changed, &QCheckBox::toggled, this, [this](bool on) {
    m_filter->setChangedOnly(on);
    updateSummary();
  });
  connect(m_wrong, &QCheckBox::toggled, this, [this](bool on) {
    m_filter->setWrongOnly(on);
    updateSummary();
  });
  connect(&m_runLog, &RunLog::samplesLoaded, this, &SamplesPanel::onSamples);
  makeVerdictActions();
}

void SamplesPanel::makeVerdictActions() {
  m_menu = new QMenu(this);
  m_menu->setObjectName(QStringLiteral("samplesVerdictMenu"));
  m_markGood = m_menu->addAction(tr("Mark &good"));
  m_markGood->setShortcut(Qt::Key_G);
  m_markBad = m_menu->addAction(tr("Mark &bad"));
  m_markBad->setShortcut(Qt::Key_B);
  m_clearMark = m_menu->addAction(tr("&Clear the mark"));
  m_clearMark->setShortcut(Qt::Key_0);
  // The menu shows the keys; the table takes them itself (eventFilter), so they act only while it
  // has the focus, and never reach its keyboard search.
  for (QAction* action : {m_markGood, m_markBad, m_clearMark})
    action->setShortcutContext(Qt::WidgetShortcut);
  m_view->installEventFilter(this);
  connect(m_markGood, &QAction::triggered, this, [this] { markSelected(backend::Verdict::good); });
  connect(m_markBad, &QAction::triggered, this, [this] { markSelected(backend::Verdict::bad); });
  connect(m_clearMark, &QAction::triggered, this, [this] { markSelected(std::nullopt); });
  m_view->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(m_view, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    const QModelIndex index = m_view->indexAt(at);
    if (!index.isValid() || index.column() == 0) return;
    if (!m_view->selectionModel()->isSelected(index)) m_view->setCurrentIndex(index);
    m_menu->popup(m_view->viewport()->mapToGlobal(at));
  });
}

bool SamplesPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched != m_view || event->type() != QEvent::KeyPress)
    return QWidget::eventFilter(watched, event);
  const auto* key = static_cast<QKeyEvent*>(event);
  if ((key->modifiers() & ~Qt::KeypadModifier) != Qt::NoModifier) return false;
  switch (key->key()) {
    case Qt::Key_G:
      return markSelected(backend::Verdict::good);
    case Qt::Key_B:
      return markSelected(backend::Verdict::bad);
    case Qt::Key_0:
      return markSelected(std::nullopt);
    default:
      return false;
  }
}

bool SamplesPanel::markSelected(std::optional<backend::Verdict> verdict) {
  QVector<VerdictEdit> edits;
  for (const QModelIndex& index : m_view->selectionModel()->selectedIndexes()) {
    if (index.column() == 0) continue;
    const qint64 step = index.data(SamplesModel::StepRole).toLongLong();
    if (step < 0 || !index.data(Qt::DisplayRole).isValid()) continue;  // no answer there
    edits.append({index.data(SamplesModel::RunRole).toLongLong(),
                  index.data(SamplesModel::ProbeRole).toString(), step, verdict});
  }
  if (edits.isEmpty()) return false;
  m_runLog.setVerdicts(edits);
  return true;
}

QString SamplesPanel::verdictSummary() const {
  backend::VerdictCounts total;
  for (qint64 run : m_model->runs()) {
    const auto counts = m_model->verdictCounts(run);
    total.good += counts.good;
    total.bad += counts.bad;
  }
  const auto rate = total.goodRate();
  if (!rate) return {};
  return tr("Marked: %1 good, %2 bad (good rate %3%).")
      .arg(total.good)
      .arg(total.bad)
      .arg(qRound(*rate * 100));
}

void SamplesPanel::setRuns(const QList<qint64>& runIds, const QString& objectiveKey,
                           bool minimize) {
  const bool trials = runIds.size() > 1;
  watch(runIds, trials, trials ? objectiveKey : QString(), minimize);
}

void SamplesPanel::showTrials(const QList<qint64>& runIds, qint64 focusRunId,
                              const QString& objectiveKey, bool minimize) {
  m_focusRun = focusRunId;
  m_focusStep = -1;
  watch(runIds, true, objectiveKey, minimize);
  focusPending();
}

void SamplesPanel::showStep(qint64 runId, qint64 step) {
  m_focusRun = runId;
  m_focusStep = step;
  watch({runId}, false, {}, true);
  focusPending();
}

void SamplesPanel::watch(const QList<qint64>& runIds, bool trials, const QString& objectiveKey,
                         bool minimize) {
  if (runIds == m_model->runs() && trials == m_model->trialsMode() && objectiveKey == m_objective &&
      minimize == m_minimize)
    return;
  m_objective = objectiveKey;
  m_minimize = minimize;
  m_loaded = false;
  m_model->setRuns(runIds, trials);
  updateSummary();
  m_runLog.watchSamples(runIds, trials ? objectiveKey : QString(), minimize);
}

void SamplesPanel::onSamples(const SamplesDelta& delta) {
  if (delta.runIds != m_model->runs()) return;  // an earlier selection's read
  m_model->apply(delta);
  m_loaded = true;
  updateSummary();
  focusPending();
  emit loaded();
}

void SamplesPanel::focusPending() {
  if (m_focusRun < 0) return;
  const int column = m_model->columnOf(m_focusRun, m_focusStep);
  if (column < 0 || m_model->rowCount() == 0) return;
  m_focusRun = -1;
  const QModelIndex at = m_filter->index(0, column);
  m_view->selectColumn(column);
  m_view->scrollTo(at, QAbstractItemView::PositionAtCenter);
  m_view->setCurrentIndex(at);
}

// What the view says before a run is chosen: where answers come from, and the demo that has some
// (the tiny token demo the other panels suggest has no probes: a new user saw an empty view).
QString SamplesPanel::noRunText() {
  return tr(
      "Select a run in the Runs table to see what it answers to its probes (eval.probes: "
      "chat samples answered at every evaluation). The shapes demo has six: open "
      "examples/shapes-vqa.toml in the Builder (File > Open experiment) and Launch it.");
}

void SamplesPanel::updateSummary() {
  if (m_model->runs().isEmpty()) {
    m_summary->setText(noRunText());
    return;
  }
  if (!m_loaded) {
    m_summary->setText(tr("Reading the answers..."));
    return;
  }
  const int probes = m_model->probeCount();
  if (probes == 0) {
    m_summary->setText(
        tr("No probe answers in %n run(s) yet. Set eval.probes to a JSON Lines file of chat "
           "samples (docs/config.md): each evaluation then records what the model answers. "
           "examples/shapes-vqa.toml has six.",
           nullptr, int(m_model->runs().size())));
    return;
  }
  const int columns = m_model->columnCount() - 1;
  const QString across = m_model->trialsMode() ? tr("%n trial(s)", nullptr, columns)
                                               : tr("%n evaluation(s)", nullptr, columns);
  QString text = tr("%1 of %n probe(s) shown, across %2.", nullptr, probes)
                     .arg(m_filter->rowCount())
                     .arg(across);
  const QString marks = verdictSummary();
  text += marks.isEmpty() ? tr(" Mark the selected answers good (G) or bad (B); 0 clears.")
                          : " " + marks;
  m_summary->setText(text);
}

}  // namespace shardscope::ui
