// RunFilesWorker: RunFiles' thread (runfiles.h); a header of its own only so that moc sees it.
#pragma once

#include <QHash>
#include <QLoggingCategory>
#include <QObject>
#include <QTimer>

#include <memory>

#include "backend/lifecycle/checkpoints.h"
#include "backend/lifecycle/runcleanup.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"

Q_DECLARE_LOGGING_CATEGORY(lcRunFiles)

namespace shardscope::ui {

// Lives in RunFiles' thread: every file-system walk, SSH command and run-log write of clean-up.
// Measurements go one run per turn of the event loop, so a delete asked meanwhile is not held up
// behind a long queue.
class RunFilesWorker : public QObject {
  Q_OBJECT

 public:
  void setPath(const QString& path) {
    if (path != m_path) m_store.reset();
    m_path = path;
  }

  void enqueue(const QVector<backend::RunRecord>& runs) {
    for (const auto& run : runs) {
      if (!m_queued.contains(run.id)) m_queue.append(run.id);
      m_queued.insert(run.id, run);
    }
    scheduleNext();
  }

  void remove(const QVector<backend::RunRecord>& runs) {
    backend::RunStore* store = writer();
    if (store == nullptr) return;
    qint64 freed = 0;
    QStringList problems;
    int removed = 0;
    for (const auto& run : runs) {
      auto result = m_cleaner.removeRun(*store, run);
      if (!result) {
        problems << QString::fromStdString(result.message());
        continue;
      }
      freed += result->freedBytes;
      if (result->rowsDeleted) ++removed;
      if (!result->left.isEmpty()) problems << run.name + tr(": left ") + result->left;
    }
    QString text =
        tr("Deleted %n run(s), %1 freed", nullptr, removed).arg(backend::humanBytes(freed));
    if (!problems.isEmpty()) text += QStringLiteral("; ") + problems.join(QStringLiteral("; "));
    emit done(problems.isEmpty(), text);
  }

  void setArchived(const QList<qint64>& runIds, bool archived) {
    backend::RunStore* store = writer();
    if (store == nullptr) return;
    for (const qint64 id : runIds) {
      if (auto r = store->setArchived(id, archived).get(); !r) {
        emit done(false, QString::fromStdString(r.message()));
        return;
      }
    }
    emit done(true, archived
                        ? tr("Archived %n run(s)", nullptr, static_cast<int>(runIds.size()))
                        : tr("Unarchived %n run(s)", nullptr, static_cast<int>(runIds.size())));
  }

  void keepBest(qint64 studyId, int keep) {
    auto reader = backend::RunReader::open(m_path);
    if (!reader) {
      emit done(false, QString::fromStdString(reader.message()));
      return;
    }
    auto study = reader->study(studyId);
    auto trials = reader->trials(studyId);
    if (!study || !*study || !trials) {
      emit done(false, tr("The study is no longer in the run log"));
      return;
    }
    auto gc = backend::keepBestCheckpoints(m_cleaner, **study, *trials, keep);
    if (!gc) {
      emit done(false, QString::fromStdString(gc.message()));
      return;
    }
    QString text = tr("%1: kept the checkpoints of the best %2, freed %3")
                       .arg((*study)->name)
                       .arg(gc->kept.size())
                       .arg(backend::humanBytes(gc->freedBytes));
    if (!gc->left.isEmpty()) text += QStringLiteral("; ") + gc->left.join(QStringLiteral("; "));
    emit done(gc->left.isEmpty(), text);
    QVector<backend::RunRecord> again(trials->begin(), trials->end());
    enqueue(again);
  }

  void listCheckpoints(const backend::RunRecord& run) {
    auto reader = backend::RunReader::open(m_path);
    if (!reader) {
      emit checkpointsListed(run.id, {}, QString::fromStdString(reader.message()));
      return;
    }
    auto all = backend::listCheckpoints(*reader, m_cleaner, run);
    if (!all) {
      emit checkpointsListed(run.id, {}, QString::fromStdString(all.message()));
      return;
    }
    emit checkpointsListed(run.id, QVector<backend::CheckpointInfo>(all->begin(), all->end()), {});
  }

  void exportCheckpoint(const backend::RunRecord& run, const backend::CheckpointInfo& checkpoint,
                        backend::ExportFormat format, const QString& dir,
                        const QString& trainerDir) {
    auto written = backend::exportCheckpoint(run, checkpoint, format, dir, trainerDir);
    emit exported(run.id, checkpoint.step, written ? *written : QString(),
                  written ? QString() : QString::fromStdString(written.message()));
  }

 signals:
  void measured(qint64 runId, qint64 bytes, qint64 checkpointBytes, const QString& error);
  void done(bool ok, const QString& message);
  void checkpointsListed(qint64 runId, const QVector<backend::CheckpointInfo>& checkpoints,
                         const QString& error);
  void exported(qint64 runId, qint64 step, const QString& dir, const QString& error);

 private:
  void scheduleNext() {
    if (m_scheduled || m_queue.isEmpty()) return;
    m_scheduled = true;
    QTimer::singleShot(0, this, [this] {
      m_scheduled = false;
      measureNext();
    });
  }

  void measureNext() {
    if (m_queue.isEmpty()) return;
    const qint64 id = m_queue.takeFirst();
    const backend::RunRecord run = m_queued.take(id);
    auto disk = m_cleaner.measure(run);
    if (disk) {
      emit measured(id, disk->bytes, disk->checkpointBytes, {});
    } else {
      qCInfo(lcRunFiles).noquote() << run.name << QString::fromStdString(disk.message());
      emit measured(id, -1, -1, QString::fromStdString(disk.message()));
    }
    scheduleNext();
  }

  backend::RunStore* writer() {
    if (m_store && m_store->path() == m_path) return m_store.get();
    auto store = backend::RunStore::open(m_path);
    if (!store) {
      emit done(false, QString::fromStdString(store.message()));
      return nullptr;
    }
    m_store = std::move(*store);
    return m_store.get();
  }

  QString m_path;
  backend::RunCleaner m_cleaner;
  std::unique_ptr<backend::RunStore> m_store;
  QList<qint64> m_queue;
  QHash<qint64, backend::RunRecord> m_queued;
  bool m_scheduled = false;
};

}  // namespace shardscope::ui
