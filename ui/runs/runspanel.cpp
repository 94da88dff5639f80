#include "ui/runs/runspanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QMenu>
#include <QSortFilterProxyModel>
#include <QTextBrowser>
#include <QToolBar>
#include <QTreeView>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

#include "backend/store/runquery.h"
#include "backend/store/runusage.h"
#include "ui/data/runlog.h"
#include "ui/runs/rungroupmodel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/runs/tagdialogs.h"
#include "ui/runs/tagsdelegate.h"

Q_LOGGING_CATEGORY(lcRunsPanel, "shardscope.ui.runspanel")

namespace shardscope::ui {

namespace {

// What the query language sees of a row.
backend::RunFacts factsOf(const RunSummary& run) {
  backend::RunFacts facts;
  const auto& r = run.record;
  facts.name = r.name;
  facts.status = QString::fromLatin1(spec::to_string(r.status).data());
  facts.tags = run.tags;
  facts.groups = run.groups;
  facts.params = run.values;  // the experiment's, for the keys the query names
  for (auto it = r.params.begin(); it != r.params.end(); ++it)
    facts.params.insert(it.key(), it.value().toVariant());
  facts.last = run.last;
  facts.best = run.best;
  facts.words = {RunTableModel::paramsSummary(r.params), run.host};
  return facts;
}

// Matches the filter's query (backend/store/runquery.h); the status combo against status.
class RunFilterProxy : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;
  QString status;  // "" = every status
  bool showArchived = false;
  backend::RunQuery query;

 protected:
  bool filterAcceptsRow(int row, const QModelIndex& parent) const override {
    const auto* model = static_cast<const RunTableModel*>(sourceModel());
    const RunSummary* run = parent.isValid() ? nullptr : model->runAt(row);
    if (run == nullptr) return false;
    if (!showArchived && run->record.archivedAt) return false;
    if (!status.isEmpty() &&
        QString::fromLatin1(spec::to_string(run->record.status).data()) != status)
      return false;
    return query.isEmpty() || query.matches(factsOf(*run));
  }

  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override {
    const auto* model = static_cast<const RunTableModel*>(sourceModel());
    return model->lessThan(left.row(), right.row(), left.column());
  }
};

}  // namespace

RunsPanel::RunsPanel(RunLog& runLog, QWidget* parent)
    : QWidget(parent),
      m_model(new RunTableModel(this)),
      m_view(new QTreeView(this)),
      m_runLog(runLog) {
  m_model->setPrices(backend::loadHostPrices());
  auto* proxy = new RunFilterProxy(this);
  m_proxy = proxy;
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(RunTableModel::SortRole);
  m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);

  auto* bar = new QToolBar(this);
  m_filter = new QLineEdit(this);
  m_filter->setPlaceholderText(
      tr("Filter: name, tag:best, group:base, status:oom, train.lr>1e-4, loss<1.6"));
  m_filter->setToolTip(
      tr("Words match the name, parameters or host. tag:NAME, group:NAME, status:STATUS, "
         "name:TEXT; "
         "KEY<VALUE (< <= > >= = !=) compares a parameter (train.lr) or a metric's last value "
         "(loss; best.loss: its lowest); -TERM negates; terms are ANDed."));
  m_filter->setClearButtonEnabled(true);
  m_filter->setMinimumWidth(260);
  m_queryError = new QLabel(this);
  m_queryError->setObjectName(QStringLiteral("runsQueryError"));
  m_queryError->setStyleSheet(QStringLiteral("color: #c62828; padding-left: 6px"));
  m_queryError->hide();
  m_statusFilter = new QComboBox(this);
  m_statusFilter->addItem(tr("All statuses"), QString());
  for (auto s : {spec::RunStatus::queued, spec::RunStatus::running, spec::RunStatus::complete,
                 spec::RunStatus::stopped, spec::RunStatus::pruned, spec::RunStatus::failed,
                 spec::RunStatus::oom, spec::RunStatus::infeasible}) {
    const QString name = QString::fromLatin1(spec::to_string(s).data());
    m_statusFilter->addItem(RunTableModel::statusIcon(s), name, name);
  }
  m_stop = new QAction(tr("Stop"), this);
  m_stop->setToolTip(tr("Stop the selected running runs gracefully (checkpoint, then exit)"));
  m_prune = new QAction(tr("Prune trial"), this);
  m_prune->setToolTip(tr("Prune the selected running trials of a sweep now (they end pruned)"));
  m_resume = new QAction(tr("Resume"), this);
  m_resume->setToolTip(
      tr("Resume the selected stopped or failed run from its newest checkpoint (a new attempt)"));
  m_clone = new QAction(tr("Clone and edit"), this);
  m_clone->setToolTip(tr("Open the selected run's parameters in the experiment builder"));
  m_editTags = new QAction(tr("Edit tags..."), this);
  m_editTags->setToolTip(tr("Add or remove tags of the selected runs"));
  m_editNote = new QAction(tr("Edit note..."), this);
  m_editNote->setToolTip(tr("Write the selected run's note (plain text or Markdown)"));
  bar->addWidget(m_filter);
  m_queryErrorAction = bar->addWidget(m_queryError);
  m_queryErrorAction->setVisible(false);
  bar->addWidget(m_statusFilter);
  bar->addSeparator();
  bar->addAction(m_stop);
  bar->addAction(m_prune);
  bar->addAction(m_resume);
  bar->addAction(m_clone);
  setupFileActions();
  bar->addWidget(m_showArchived);
  setupGroupActions();
  bar->addSeparator();
  bar->addWidget(new QLabel(tr("Group by"), this));
  bar->addWidget(m_groupBy);
  connect(m_showArchived, &QCheckBox::toggled, this, [this](bool on) {
    static_cast<RunFilterProxy*>(m_proxy)->showArchived = on;
    m_proxy->invalidate();
  });

  m_view->setModel(m_proxy);
  m_view->setItemDelegateForColumn(RunTableModel::TagsCol, new TagsDelegate(m_view));
  m_view->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(m_view, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QMenu menu(this);
    menu.addActions({m_editTags, m_editNote});
    menu.addSeparator();
    aimGroupActions(at);
    fillRemoveFromGroup();
    menu.addAction(m_addToGroup);
    menu.addMenu(m_removeFromGroup);
    menu.addActions({m_compareGroup, m_renameGroup, m_deleteGroup});
    menu.addSeparator();
    menu.addActions({m_stop, m_prune, m_resume, m_clone});
    menu.addSeparator();
    menu.addAction(m_checkpoints);
    menu.addActions({m_archive, m_unarchive, m_keepBest, m_delete});
    menu.exec(m_view->viewport()->mapToGlobal(at));
  });
  m_view->setSortingEnabled(true);
  m_view->sortByColumn(RunTableModel::NameCol, Qt::AscendingOrder);
  m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_view->setAlternatingRowColors(true);
  m_view->setAllColumnsShowFocus(true);
  // Flat until rows are grouped (applyGroupBy).
  m_view->setRootIsDecorated(false);
  m_view->setItemsExpandable(true);
  // Rows of one height, and columns sized from the rows in view: with 10,000 runs, measuring
  // every row's text (the default) took most of the table's first paint.
  m_view->setUniformRowHeights(true);
  m_view->header()->setResizeContentsPrecision(0);
  m_view->header()->setStretchLastSection(false);
  m_view->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_view->header()->setSectionResizeMode(RunTableModel::ParamsCol, QHeaderView::Stretch);

  // An empty run log says how to start, in place of an empty table.
  m_empty = new QLabel(
      tr("<p><b>No runs in this run log yet.</b></p>"
         "<p>Start one from the <b>Builder</b> tab: choose <i>demo</i> and press <i>New from "
         "template</i> (a tiny model, 2 local ranks, about half a minute), then <b>Launch</b>. "
         "Or open an experiment file (File &gt; Open experiment), or from a terminal: "
         "<code>shardscope-cli run examples/demo.toml</code>.</p>"
         "<p>To see what a model answers, open <code>examples/shapes-vqa.toml</code> (a tiny "
         "vision-language model learning to answer questions about drawn shapes, a few minutes; "
         "its data is made on first open): the <b>Samples</b> tab fills with its answers to six "
         "probes at each evaluation.</p>"
         "<p>Runs and sweeps show here as they start; their curves below.</p>"),
      this);
  m_empty->setObjectName(QStringLiteral("runsEmptyState"));
  m_empty->setWordWrap(true);
  m_empty->setAlignment(Qt::AlignCenter);
  m_empty->setTextFormat(Qt::RichText);
  m_empty->hide();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  m_noteView = new QTextBrowser(this);
  m_noteView->setObjectName(QStringLiteral("runNote"));
  m_noteView->setOpenExternalLinks(true);
  m_noteView->setMaximumHeight(110);
  m_noteView->hide();
  layout->addWidget(bar);
  layout->addWidget(m_view);
  layout->addWidget(m_noteView);
  layout->addWidget(m_empty, 1);

  connect(m_filter, &QLineEdit::textChanged, this, &RunsPanel::applyQuery);
  connect(m_editTags, &QAction::triggered, this, &RunsPanel::openTagEditor);
  connect(m_editNote, &QAction::triggered, this, &RunsPanel::openNoteEditor);
  connect(&runLog, &RunLog::knownTagsLoaded, this,
          [this](const QStringList& names) { m_knownTags = names; });
  connect(&runLog, &RunLog::edited, this,
          [this](bool, const QString& text) { emit message(text); });
  connect(m_statusFilter, &QComboBox::currentIndexChanged, this, &RunsPanel::applyStatusFilter);
  connectSelection();
  connect(&runLog, &RunLog::runsLoaded, this, &RunsPanel::onRunsLoaded);
  connect(m_stop, &QAction::triggered, this, [this] {
    for (qint64 id : selectedRunIds()) {
      const RunSummary* run = m_model->runById(id);
      if (run == nullptr || spec::is_final(run->record.status)) continue;
      if (run->record.studyId) {
        emit trialRequested(id, run->record.name, backend::TrialRequest::stop);
      } else {
        emit stopRequested(id, run->record.name);
      }
    }
  });
  connect(m_resume, &QAction::triggered, this, [this] {
    for (qint64 id : selectedRunIds()) {
      if (const RunSummary* run = m_model->runById(id); run != nullptr && resumable(*run))
        emit resumeRequested(id, run->record.name);
    }
  });
  connect(m_prune, &QAction::triggered, this, [this] {
    for (qint64 id : selectedRunIds()) {
      const RunSummary* run = m_model->runById(id);
      if (run != nullptr && run->record.studyId && !spec::is_final(run->record.status))
        emit trialRequested(id, run->record.name, backend::TrialRequest::prune);
    }
  });
  connect(m_clone, &QAction::triggered, this, [this] {
    const auto ids = selectedRunIds();
    if (const RunSummary* run = ids.isEmpty() ? nullptr : m_model->runById(ids.first())) {
      emit cloneRequested(run->record.id, run->record.params);
    }
  });
  updateActions();
}

void RunsPanel::connectSelection() {
  connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &RunsPanel::onSelectionChanged);
  // Clicking another of the selected runs (ctrl+click keeps the set) moves the log to it.
  connect(m_view->selectionModel(), &QItemSelectionModel::currentChanged, this, [this] {
    if (m_restoring) return;
    showNote();
    const qint64 current = currentRunId();
    if (current == m_current) return;
    m_current = current;
    emit selectionChanged(m_selected);
  });
}

bool RunsPanel::resumable(const RunSummary& run) {
  // A sweep retries its own trials; a complete run has nothing left to do.
  const spec::RunStatus s = run.record.status;
  return !run.record.studyId && (s == spec::RunStatus::stopped || s == spec::RunStatus::failed ||
                                 s == spec::RunStatus::oom);
}

void RunsPanel::applyStatusFilter() {
  static_cast<RunFilterProxy*>(m_proxy)->status = m_statusFilter->currentData().toString();
  m_proxy->invalidate();
}

void RunsPanel::applyQuery(const QString& text) {
  backend::RunQueryError error;
  auto query = backend::RunQuery::parse(text, &error);
  // A query being typed is often wrong for a moment ("train.lr>"): the last good one stays
  // applied and the box says what is wrong until it parses again.
  m_queryError->setText(query ? QString() : error.message);
  m_queryErrorAction->setVisible(!query);
  m_queryError->setVisible(!query);
  if (!query) return;
  QStringList params;
  for (const auto& term : query->terms()) {
    if (term.kind == backend::RunQuery::Kind::value &&
        (term.source == backend::RunQuery::Source::any ||
         term.source == backend::RunQuery::Source::param) &&
        !params.contains(term.key))
      params.append(term.key);
  }
  m_runLog.setQueryKeys(params, query->metricKeys());
  static_cast<RunFilterProxy*>(m_proxy)->query = std::move(*query);
  m_proxy->invalidate();
}

TagEditDialog* RunsPanel::tagDialog() const { return m_tagDialog.data(); }

NoteDialog* RunsPanel::noteDialog() const { return m_noteDialog.data(); }

void RunsPanel::openTagEditor() {
  const QList<qint64> ids = selectedRunIds();
  if (ids.isEmpty()) return;
  auto* dialog = new TagEditDialog(static_cast<int>(ids.size()), m_knownTags, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  m_tagDialog = dialog;
  connect(dialog, &QDialog::accepted, this, [this, dialog, ids] {
    const TagEdits edits = dialog->edits();
    if (edits.error.isEmpty()) m_runLog.editTags(ids, edits.add, edits.remove);
  });
  dialog->open();
}

void RunsPanel::openNoteEditor() {
  const RunSummary* run = m_model->runById(currentRunId());
  if (run == nullptr) return;
  auto* dialog = new NoteDialog(run->record.name, run->note, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  m_noteDialog = dialog;
  const qint64 id = run->record.id;
  connect(dialog, &QDialog::accepted, this,
          [this, dialog, id] { m_runLog.setNote(id, dialog->note()); });
  dialog->open();
}

void RunsPanel::showNote() {
  const RunSummary* run = m_model->runById(currentRunId());
  const QString note = run != nullptr ? run->note : QString();
  if (note != m_noteView->document()->property("source").toString()) {
    m_noteView->setMarkdown(note);
    m_noteView->document()->setProperty("source", note);
  }
  m_noteView->setVisible(!note.isEmpty());
}

void RunsPanel::onRunsLoaded(const QVector<RunSummary>& runs) {
  // A reset forgets the selection: put the same runs back without telling the plots.
  m_restoring = true;
  QList<qint64> keep = m_selected;
  if (keep.removeOne(m_current)) keep.prepend(m_current);  // the current run stays current
  m_model->setRuns(runs);
  measureChanged(runs);
  selectRuns(keep);
  m_restoring = false;
  updateActions();
  showNote();
  const bool empty = m_model->rowCount() == 0;
  m_empty->setVisible(empty);
  m_view->setVisible(!empty);
  if (!m_loaded) {
    m_loaded = true;
    emit loaded();
  }
}

QList<qint64> RunsPanel::selectedRunIds() const {
  QList<qint64> ids;
  const auto rows = m_view->selectionModel()->selectedRows();
  for (const QModelIndex& index : rows) {
    const QVariant id = index.data(RunTableModel::RunIdRole);
    // Grouped, a run in two buckets is one run; a parent row is none.
    if (id.isValid() && !ids.contains(id.toLongLong())) ids.append(id.toLongLong());
  }
  return ids;
}

void RunsPanel::selectRuns(const QList<qint64>& runIds) {
  // One announcement for the new selection and its current run, after both are set.
  const bool restoring = std::exchange(m_restoring, true);
  // Putting a selection back never scrolls to it: that would open a parent the user closed.
  const bool autoScroll = m_view->hasAutoScroll();
  if (restoring) m_view->setAutoScroll(false);
  // The view's rows of a run: the proxy's, or grouped, one under each bucket it is in.
  const auto rowsOf = [this](qint64 id) {
    if (m_view->model() == m_groups) return m_groups->indexesOfRun(id);
    const int row = m_model->rowOf(id);
    const QModelIndex index =
        row < 0 ? QModelIndex() : m_proxy->mapFromSource(m_model->index(row, 0));
    return index.isValid() ? QModelIndexList{index} : QModelIndexList{};
  };
  QItemSelection selection;
  for (qint64 id : runIds) {
    for (const QModelIndex& index : rowsOf(id)) selection.select(index, index);
  }
  m_view->selectionModel()->select(selection,
                                   QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  if (!selection.isEmpty()) {
    // The first run given is the one the log shows: current, without touching the selection.
    const QModelIndexList first = rowsOf(runIds.first());
    if (!first.isEmpty())
      m_view->selectionModel()->setCurrentIndex(first.first(), QItemSelectionModel::NoUpdate);
  }
  m_view->setAutoScroll(autoScroll);
  m_restoring = restoring;
  onSelectionChanged();
}

qint64 RunsPanel::currentRunId() const {
  const QModelIndex current = m_view->selectionModel()->currentIndex();
  const QList<qint64> ids = selectedRunIds();
  if (current.isValid()) {
    const qint64 id = current.data(RunTableModel::RunIdRole).toLongLong();
    if (ids.contains(id)) return id;
  }
  return ids.isEmpty() ? -1 : ids.first();
}

int RunsPanel::visibleRowCount() const { return m_proxy->rowCount(); }

void RunsPanel::onSelectionChanged() {
  updateActions();
  showNote();
  if (m_restoring) return;
  const QList<qint64> ids = selectedRunIds();
  if (ids == m_selected && currentRunId() == m_current) return;
  m_selected = ids;
  m_current = currentRunId();
  qCDebug(lcRunsPanel, "%lld runs selected", static_cast<long long>(ids.size()));
  emit selectionChanged(ids);
}

void RunsPanel::updateActions() {
  bool anyLive = false;
  bool anyLiveTrial = false;
  const auto ids = selectedRunIds();
  for (qint64 id : ids) {
    const RunSummary* run = m_model->runById(id);
    const bool live = run != nullptr && !spec::is_final(run->record.status);
    anyLive = anyLive || live;
    anyLiveTrial = anyLiveTrial || (live && run->record.studyId.has_value());
  }
  m_stop->setEnabled(anyLive);
  m_prune->setEnabled(anyLiveTrial);
  m_resume->setEnabled(std::any_of(ids.begin(), ids.end(), [this](qint64 id) {
    const RunSummary* run = m_model->runById(id);
    return run != nullptr && resumable(*run);
  }));
  m_clone->setEnabled(ids.size() == 1);
  m_checkpoints->setEnabled(!ids.isEmpty());
  m_editTags->setEnabled(!ids.isEmpty());
  m_editNote->setEnabled(!ids.isEmpty());
  m_addToGroup->setEnabled(!ids.isEmpty());
  updateFileActions(ids);
}

}  // namespace shardscope::ui
