#include "ui/runs/checkpointsdialog.h"

#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include <set>

#include "backend/lifecycle/runcleanup.h"
#include "ui/data/runfiles.h"

namespace shardscope::ui {

namespace {

enum Column { StepCol, KindCol, AttemptCol, SizeCol, FirstEvalCol };

QTableWidgetItem* cell(const QString& text, Qt::Alignment align = Qt::AlignLeft) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  item->setTextAlignment(align | Qt::AlignVCenter);
  return item;
}

QString sizeText(const backend::CheckpointInfo& c) {
  if (!c.measured) return QStringLiteral("?");
  if (!c.present) return QObject::tr("removed");
  return backend::humanBytes(c.bytes);
}

}  // namespace

CheckpointsDialog::CheckpointsDialog(RunFiles& files, const backend::RunRecord& run,
                                     QWidget* parent)
    : QDialog(parent), m_files(files), m_run(run) {
  setObjectName(QStringLiteral("checkpointsDialog"));
  setWindowTitle(tr("Checkpoints of %1").arg(run.name));
  setAttribute(Qt::WA_DeleteOnClose);
  m_table = new QTableWidget(this);
  m_table->setObjectName(QStringLiteral("checkpointsTable"));
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->verticalHeader()->hide();
  m_table->setAlternatingRowColors(true);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_status = new QLabel(tr("Reading the checkpoints and measuring them..."), this);
  m_status->setObjectName(QStringLiteral("checkpointsStatus"));
  m_status->setWordWrap(true);

  m_resume = new QPushButton(tr("Resume from here"), this);
  m_resume->setToolTip(
      tr("Start a new run of this run's experiment from the selected sharded checkpoint: its "
         "first step follows the checkpoint's"));
  m_export = new QPushButton(tr("Export..."), this);
  m_export->setToolTip(
      tr("Write the selected sharded checkpoint as a Hugging Face folder or a "
         "PEFT adapter (runs with [lora])"));
  auto* exportMenu = new QMenu(m_export);
  exportMenu->addAction(tr("Hugging Face folder..."), this,
                        [this] { chooseExportFolder(backend::ExportFormat::huggingFace); });
  exportMenu->addAction(tr("PEFT adapter..."), this,
                        [this] { chooseExportFolder(backend::ExportFormat::peftAdapter); });
  m_export->setMenu(exportMenu);
  m_samples = new QPushButton(tr("Open samples at this step"), this);
  m_samples->setToolTip(tr("Show the probe answers the run gave at the selected step"));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  buttons->addButton(m_resume, QDialogButtonBox::ActionRole);
  buttons->addButton(m_export, QDialogButtonBox::ActionRole);
  buttons->addButton(m_samples, QDialogButtonBox::ActionRole);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_table, 1);
  layout->addWidget(m_status);
  layout->addWidget(buttons);
  resize(760, 360);

  connect(m_table, &QTableWidget::itemSelectionChanged, this, &CheckpointsDialog::updateButtons);
  connect(m_resume, &QPushButton::clicked, this, [this] {
    if (const auto* c = selected()) emit resumeFromRequested(m_run.id, m_run.name, c->step);
  });
  connect(m_samples, &QPushButton::clicked, this, [this] {
    if (const auto* c = selected()) emit samplesRequested(m_run.id, c->step);
  });
  connect(&m_files, &RunFiles::checkpointsListed, this, &CheckpointsDialog::onListed);
  connect(&m_files, &RunFiles::exported, this, &CheckpointsDialog::onExported);
  updateButtons();
  reload();
}

void CheckpointsDialog::reload() { m_files.listCheckpoints(m_run); }

void CheckpointsDialog::onListed(qint64 runId, const QVector<backend::CheckpointInfo>& checkpoints,
                                 const QString& error) {
  if (runId != m_run.id) return;
  m_loaded = true;
  m_checkpoints = checkpoints;
  std::set<QString> evalKeys;
  for (const auto& c : checkpoints)
    for (auto it = c.eval.begin(); it != c.eval.end(); ++it) evalKeys.insert(it.key());
  QStringList headers{tr("Step"), tr("Kind"), tr("Attempt"), tr("Size")};
  for (const QString& key : evalKeys) headers << tr("eval %1").arg(key);
  headers << tr("Path");
  m_table->clear();
  m_table->setColumnCount(int(headers.size()));
  m_table->setHorizontalHeaderLabels(headers);
  m_table->setRowCount(int(checkpoints.size()));
  qint64 total = 0;
  int present = 0;
  QStringList problems;
  for (int row = 0; row < checkpoints.size(); ++row) {
    const auto& c = checkpoints[row];
    m_table->setItem(row, StepCol, cell(QString::number(c.step), Qt::AlignRight));
    m_table->setItem(row, KindCol, cell(c.kind));
    m_table->setItem(row, AttemptCol, cell(QString::number(c.attempt), Qt::AlignRight));
    QTableWidgetItem* size = cell(sizeText(c), Qt::AlignRight);
    if (!c.error.isEmpty()) size->setToolTip(c.error);
    if (!c.present) size->setForeground(palette().color(QPalette::Disabled, QPalette::Text));
    m_table->setItem(row, SizeCol, size);
    int col = FirstEvalCol;
    for (const QString& key : evalKeys) {
      const auto it = c.eval.find(key);
      m_table->setItem(
          row, col++,
          cell(it == c.eval.end() ? QString() : QString::number(*it, 'g', 5), Qt::AlignRight));
    }
    m_table->setItem(row, col, cell((c.host.isEmpty() ? QString() : c.host + ':') + c.path));
    total += c.bytes;
    if (c.present) ++present;
    if (!c.error.isEmpty()) problems << c.error;
  }
  m_table->resizeColumnsToContents();
  problems.removeDuplicates();
  if (!error.isEmpty()) {
    m_status->setText(tr("Could not list the checkpoints: %1").arg(error));
  } else if (checkpoints.isEmpty()) {
    m_status->setText(
        tr("This run recorded no checkpoint (train.ckpt_every and "
           "train.ckpt_at_end write them)."));
  } else {
    QString text =
        tr("%n checkpoint(s) recorded, %1 on disk taking %2", nullptr, int(checkpoints.size()))
            .arg(present)
            .arg(backend::humanBytes(total));
    if (!problems.isEmpty()) text += QStringLiteral(". ") + problems.join(QStringLiteral("; "));
    m_status->setText(text);
  }
  if (!checkpoints.isEmpty()) m_table->selectRow(int(checkpoints.size()) - 1);
  updateButtons();
  emit loaded();
}

const backend::CheckpointInfo* CheckpointsDialog::selected() const {
  const auto rows = m_table->selectionModel()->selectedRows();
  if (rows.isEmpty()) return nullptr;
  const int row = rows.first().row();
  return row >= 0 && row < m_checkpoints.size() ? &m_checkpoints[row] : nullptr;
}

bool CheckpointsDialog::selectStep(qint64 step) {
  for (int row = int(m_checkpoints.size()) - 1; row >= 0; --row) {
    if (m_checkpoints[row].step != step) continue;
    m_table->selectRow(row);
    return true;
  }
  return false;
}

void CheckpointsDialog::updateButtons() {
  const backend::CheckpointInfo* c = selected();
  const bool resumable = c != nullptr && c->kind == QLatin1String("sharded") && c->present;
  m_resume->setEnabled(resumable);
  m_export->setEnabled(resumable && c->host.isEmpty() && !m_exporting);
  m_samples->setEnabled(c != nullptr && c->samples);
  if (c != nullptr && !c->host.isEmpty())
    m_export->setToolTip(
        tr("The checkpoint is on %1: export it there with `shardtrain export`").arg(c->host));
}

void CheckpointsDialog::chooseExportFolder(backend::ExportFormat format) {
  const backend::CheckpointInfo* c = selected();
  if (c == nullptr) return;
  const QString parent = QFileDialog::getExistingDirectory(
      this, tr("Export step %1 of %2 into").arg(c->step).arg(m_run.name), QDir::homePath());
  if (parent.isEmpty()) return;
  const QString name =
      QStringLiteral("%1-step-%2-%3")
          .arg(m_run.name)
          .arg(c->step)
          .arg(format == backend::ExportFormat::peftAdapter ? QStringLiteral("peft")
                                                            : QStringLiteral("hf"));
  exportTo(format, QDir(parent).filePath(name));
}

void CheckpointsDialog::exportTo(backend::ExportFormat format, const QString& dir) {
  const backend::CheckpointInfo* c = selected();
  if (c == nullptr) return;
  m_exporting = true;
  updateButtons();
  m_status->setText(tr("Exporting step %1 to %2...").arg(c->step).arg(dir));
  m_files.exportCheckpoint(m_run, *c, format, dir);
}

void CheckpointsDialog::onExported(qint64 runId, qint64 step, const QString& dir,
                                   const QString& error) {
  if (runId != m_run.id) return;
  m_exporting = false;
  updateButtons();
  const QString text = error.isEmpty()
                           ? tr("Exported step %1 of %2 to %3").arg(step).arg(m_run.name, dir)
                           : tr("Could not export step %1: %2").arg(step).arg(error);
  m_status->setText(text);
  emit message(text);
}

}  // namespace shardscope::ui
