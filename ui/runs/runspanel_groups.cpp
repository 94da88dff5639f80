// RunsPanel's groups of runs (schema 12): Add to group / Remove from group / Compare, Rename and
// Delete group, and the Group by choice that shows the rows under collapsible parents
// (RunGroupModel).
#include <QComboBox>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMap>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTreeView>

#include <utility>

#include "backend/store/rungroups.h"
#include "ui/data/runlog.h"
#include "ui/runs/groupdialog.h"
#include "ui/runs/rungroupmodel.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"

namespace shardscope::ui {

void RunsPanel::setupGroupActions() {
  m_groups = new RunGroupModel(m_proxy, m_model, this);
  m_groupBy = new QComboBox(this);
  m_groupBy->setObjectName(QStringLiteral("runsGroupBy"));
  m_groupBy->setToolTip(tr("Show the runs under collapsible rows, one per sweep, group or tag"));
  m_groupBy->addItem(tr("none"), int(RunGroupModel::GroupBy::none));
  m_groupBy->addItem(tr("sweep"), int(RunGroupModel::GroupBy::sweep));
  m_groupBy->addItem(tr("group"), int(RunGroupModel::GroupBy::group));
  m_groupBy->addItem(tr("tag"), int(RunGroupModel::GroupBy::tag));
  m_addToGroup = new QAction(tr("Add to group..."), this);
  m_addToGroup->setToolTip(tr("Put the selected runs in a group, new or existing"));
  m_removeFromGroup = new QMenu(tr("Remove from group"), this);
  m_compareGroup = new QAction(tr("Compare group"), this);
  m_compareGroup->setToolTip(tr("Open the group's runs in Compare, as a sweep"));
  m_renameGroup = new QAction(tr("Rename group..."), this);
  m_renameGroup->setToolTip(tr("Give the group another name; its runs stay in it"));
  m_deleteGroup = new QAction(tr("Delete group..."), this);
  m_deleteGroup->setToolTip(tr("Delete the group; its runs stay in the run log"));

  connect(m_groupBy, &QComboBox::currentIndexChanged, this, &RunsPanel::applyGroupBy);
  connect(m_groups, &RunGroupModel::regrouped, this, &RunsPanel::onRegrouped);
  connect(m_addToGroup, &QAction::triggered, this, &RunsPanel::openGroupDialog);
  connect(m_compareGroup, &QAction::triggered, this, [this] {
    const qint64 id = m_groupIds.value(m_menuGroup, -1);
    if (id >= 0) emit compareGroupRequested(id);
  });
  connect(m_renameGroup, &QAction::triggered, this, &RunsPanel::askRenameGroup);
  connect(m_deleteGroup, &QAction::triggered, this, &RunsPanel::confirmDeleteGroup);
  connect(&m_runLog, &RunLog::knownGroupsLoaded, this,
          [this](const QStringList& names, const QList<qint64>& ids) {
            m_groupNames = names;
            m_groupIds.clear();
            for (qsizetype i = 0; i < names.size() && i < ids.size(); ++i)
              m_groupIds.insert(names[i], ids[i]);
          });
  connect(&m_runLog, &RunLog::studiesLoaded, this,
          [this](const QVector<backend::StudyRecord>& studies) {
            QHash<qint64, QString> names;
            for (const auto& study : studies) names.insert(study.id, study.name);
            m_groups->setStudyNames(names);
          });
  // Which parents the user closed, per Group by choice, so a refresh keeps them closed.
  connect(m_view, &QTreeView::collapsed, this, [this](const QModelIndex& index) {
    if (m_view->model() == m_groups && !m_restoring)
      m_collapsed[m_groupBy->currentIndex()].insert(
          index.data(RunGroupModel::BucketRole).toString());
  });
  connect(m_view, &QTreeView::expanded, this, [this](const QModelIndex& index) {
    if (m_view->model() == m_groups && !m_restoring)
      m_collapsed[m_groupBy->currentIndex()].remove(
          index.data(RunGroupModel::BucketRole).toString());
  });
}

GroupDialog* RunsPanel::groupDialog() const { return m_groupDialog.data(); }
QInputDialog* RunsPanel::renameGroupDialog() const { return m_renameGroupDialog.data(); }
QMessageBox* RunsPanel::deleteGroupDialog() const { return m_deleteGroupDialog.data(); }

void RunsPanel::aimGroupActions(const QPoint& at) {
  m_menuGroup = groupAt(at);
  const bool some = !m_menuGroup.isEmpty();
  for (QAction* action : {m_compareGroup, m_renameGroup, m_deleteGroup}) action->setEnabled(some);
  m_compareGroup->setText(some ? tr("Compare group %1").arg(m_menuGroup) : tr("Compare group"));
  m_renameGroup->setText(some ? tr("Rename group %1...").arg(m_menuGroup) : tr("Rename group..."));
  m_deleteGroup->setText(some ? tr("Delete group %1...").arg(m_menuGroup) : tr("Delete group..."));
}

void RunsPanel::askRenameGroup() {
  if (m_menuGroup.isEmpty()) return;
  const QString from = m_menuGroup;
  auto* dialog = new QInputDialog(this);
  dialog->setObjectName(QStringLiteral("renameGroupDialog"));
  dialog->setWindowTitle(tr("Rename group"));
  dialog->setTextValue(from);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  m_renameGroupDialog = dialog;
  // Checked as it is typed, as the Add to group dialog checks a name (and against the groups
  // known): OK stays disabled, with the reason under the prompt, while it is wrong or unchanged.
  // A refusal the run log still makes (another window took the name) comes back through
  // RunLog::edited, in the status bar.
  const auto check = [this, dialog, from](const QString& text) {
    const QString to = text.trimmed();
    QString why;
    if (auto valid = backend::checkGroupName(to); !valid && !to.isEmpty()) {
      why = QString::fromStdString(valid.message());
    } else if (to != from && m_groupIds.contains(to)) {
      why = tr("group %1 already exists: choose another name").arg(to);
    }
    const QString prompt = tr("New name of group %1:").arg(from);
    dialog->setLabelText(why.isEmpty() ? prompt : prompt + QLatin1Char('\n') + why);
    dialog->adjustSize();  // the reason wraps under the prompt: the dialog grows to hold it
    if (auto* buttons = dialog->findChild<QDialogButtonBox*>())
      buttons->button(QDialogButtonBox::Ok)
          ->setEnabled(why.isEmpty() && !to.isEmpty() && to != from);
  };
  connect(dialog, &QInputDialog::textValueChanged, dialog, check);
  connect(dialog, &QInputDialog::textValueSelected, this, [this, from](const QString& text) {
    const QString to = text.trimmed();
    if (!to.isEmpty() && to != from) m_runLog.renameGroup(from, to);
  });
  dialog->open();
  if (auto* label = dialog->findChild<QLabel*>()) label->setWordWrap(true);
  dialog->setMinimumWidth(380);
  check(from);
}

void RunsPanel::confirmDeleteGroup() {
  if (m_menuGroup.isEmpty()) return;
  const QString name = m_menuGroup;
  int members = 0;
  for (int row = 0; row < m_model->rowCount(); ++row) {
    if (const RunSummary* run = m_model->runAt(row); run && run->groups.contains(name)) ++members;
  }
  auto* box = new QMessageBox(
      QMessageBox::Question, tr("Delete group"),
      members == 1
          ? tr("Delete group %1? Its run stays in the run log; only the group goes.").arg(name)
          : tr("Delete group %1? Its %2 runs stay in the run log; only the group goes.")
                .arg(name)
                .arg(members),
      QMessageBox::Yes | QMessageBox::Cancel, this);
  box->setObjectName(QStringLiteral("deleteGroupDialog"));
  box->button(QMessageBox::Yes)->setText(tr("Delete group"));
  box->setDefaultButton(QMessageBox::Cancel);
  box->setAttribute(Qt::WA_DeleteOnClose);
  m_deleteGroupDialog = box;
  connect(box, &QMessageBox::finished, this, [this, box, name] {
    if (box->clickedButton() == box->button(QMessageBox::Yes)) m_runLog.deleteGroup(name);
  });
  box->open();
}

void RunsPanel::applyGroupBy() {
  const auto by = static_cast<RunGroupModel::GroupBy>(m_groupBy->currentData().toInt());
  const QList<qint64> keep = m_selected;
  m_groups->setGroupBy(by);
  QAbstractItemModel* model =
      by == RunGroupModel::GroupBy::none ? static_cast<QAbstractItemModel*>(m_proxy) : m_groups;
  if (m_view->model() != model) {
    QItemSelectionModel* old = m_view->selectionModel();
    m_restoring = true;
    m_view->setModel(model);
    m_restoring = false;
    delete old;
    connectSelection();
    // The header's sections belong to the model: the stretching column again.
    m_view->header()->setSectionResizeMode(RunTableModel::ParamsCol, QHeaderView::Stretch);
  }
  m_view->setRootIsDecorated(by != RunGroupModel::GroupBy::none);
  m_selected = keep;
  if (by != RunGroupModel::GroupBy::none) {
    onRegrouped();
    return;
  }
  // Flat again: the same runs selected, on the proxy's rows.
  const bool restoring = std::exchange(m_restoring, true);
  selectRuns(keep);
  m_restoring = restoring;
  onSelectionChanged();
}

void RunsPanel::onRegrouped() {
  if (m_view->model() != m_groups) return;
  const bool restoring = std::exchange(m_restoring, true);
  const QSet<QString>& collapsed = m_collapsed.value(m_groupBy->currentIndex());
  for (int row = 0; row < m_groups->rowCount(); ++row) {
    const QModelIndex parent = m_groups->index(row, 0);
    m_view->setFirstColumnSpanned(row, {}, true);
    m_view->setExpanded(parent,
                        !collapsed.contains(parent.data(RunGroupModel::BucketRole).toString()));
  }
  selectRuns(m_selected);
  m_restoring = restoring;
  onSelectionChanged();  // runs filtered out of view are no longer selected
}

void RunsPanel::openGroupDialog() {
  const QList<qint64> ids = selectedRunIds();
  if (ids.isEmpty()) return;
  auto* dialog = new GroupDialog(static_cast<int>(ids.size()), m_groupNames, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  m_groupDialog = dialog;
  connect(dialog, &QDialog::accepted, this,
          [this, dialog, ids] { m_runLog.editGroup(dialog->name(), ids, {}); });
  dialog->open();
}

void RunsPanel::fillRemoveFromGroup() {
  m_removeFromGroup->clear();
  QMap<QString, QList<qint64>> members;  // group -> the selected runs in it, by name
  for (qint64 id : selectedRunIds()) {
    if (const RunSummary* run = m_model->runById(id)) {
      for (const QString& group : run->groups) members[group].append(id);
    }
  }
  for (auto it = members.cbegin(); it != members.cend(); ++it) {
    QAction* action = m_removeFromGroup->addAction(
        it.value().size() == 1 ? tr("%1 (1 run)").arg(it.key())
                               : tr("%1 (%2 runs)").arg(it.key()).arg(it.value().size()));
    connect(action, &QAction::triggered, this,
            [this, group = it.key(), ids = it.value()] { m_runLog.editGroup(group, {}, ids); });
  }
  m_removeFromGroup->setEnabled(!members.isEmpty());
}

QString RunsPanel::groupAt(const QPoint& at) const {
  // Grouped by group, the parent row under the cursor names it.
  const QModelIndex index = m_view->indexAt(at);
  if (m_view->model() == m_groups && index.isValid() && !index.parent().isValid() &&
      m_groups->groupBy() == RunGroupModel::GroupBy::group)
    return index.data(RunGroupModel::BucketRole).toString();
  // Else the one group every selected run is in.
  const QList<qint64> ids = selectedRunIds();
  QStringList common;
  for (qsizetype i = 0; i < ids.size(); ++i) {
    const RunSummary* run = m_model->runById(ids[i]);
    if (run == nullptr) return {};
    if (i == 0) {
      common = run->groups;
    } else {
      common.removeIf([run](const QString& g) { return !run->groups.contains(g); });
    }
  }
  return common.size() == 1 ? common.first() : QString();
}

}  // namespace shardscope::ui
