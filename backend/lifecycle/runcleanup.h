// A run's files on disk: where they are (this machine, a host over SSH, or a machine this one
// cannot reach), how many bytes they take (checkpoints counted apart), and their removal: a whole
// run (its rows too, RunStore::deleteRun) or only its sharded checkpoints (`gc --keep-best`).
// Measuring and removing block on the file system or the network: never on the GUI thread.
//
// A run's folders: its run directory (runs.run_dir, on the machine that launched it: runs.host)
// and, for SSH and Slurm-over-SSH runs, the remote run directory (location.run_dir on each of
// location.hosts, or on location.host). Earlier attempts' folders of a resumed or retried run
// (the same path with "-resume-K", "-retry-K" or "-attempt-K") are counted and removed with it.
#pragma once

#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/store/runrecords.h"
#include "backend/store/runstore.h"
#include "spec/result.h"

namespace shardscope::backend {

class SshSession;

/// Bytes a run's folders take: regular files' sizes (as `du -sb` of the files alone), and the
/// part under its checkpoint folder `ckpt/`.
struct RunDisk {
  qint64 bytes = 0;
  qint64 checkpointBytes = 0;
};

/// One folder of a run and where it is: `host` is "" for this machine, else an SSH alias.
struct RunFolder {
  QString host;
  QString path;
};

/// Where a run's files are, as seen from this machine.
struct RunPlace {
  std::vector<RunFolder> folders;  ///< every folder this machine can reach (may be empty)
  /// Why some of the run's files cannot be reached from here ("" when all can): another
  /// machine's local run, whose files only that machine can remove.
  QString unreachable;
};

/// How this machine reaches hosts.
struct CleanupOptions {
  QString thisHost;        ///< empty: QSysInfo::machineHostName() (what runs.host records)
  QString sshConfigPath;   ///< empty: ~/.ssh/config
  QString knownHostsPath;  ///< empty: ~/.ssh/known_hosts
};

/// What deleting one run did.
struct RunRemoval {
  qint64 freedBytes = 0;
  bool rowsDeleted = false;
  /// What was left and why (files on a machine this one cannot reach); "" when nothing was.
  QString left;
};

/// Measures and removes runs' files; keeps one SSH connection per host for its lifetime. Use it
/// from one thread.
class RunCleaner {
 public:
  explicit RunCleaner(CleanupOptions options = {});
  ~RunCleaner();
  RunCleaner(const RunCleaner&) = delete;
  RunCleaner& operator=(const RunCleaner&) = delete;

  /// The run's folders and what of it is out of reach (no file system access).
  RunPlace place(const RunRecord& run) const;
  /// The bytes its reachable folders take (a folder that is gone counts 0). An error names the
  /// host when it cannot be asked.
  [[nodiscard]] Result<RunDisk> measure(const RunRecord& run);
  /// Removes the run: its reachable folders, then its rows. A running run is refused, naming
  /// the fix. When some files are out of reach the rows stay (so the machine that has them can
  /// still remove them) unless `forceRows`; RunRemoval::left says what was left.
  [[nodiscard]] Result<RunRemoval> removeRun(RunStore& store, const RunRecord& run,
                                             bool forceRows = false);
  /// Removes the run's sharded checkpoints (every `ckpt/` of its reachable folders); returns the
  /// bytes freed. A running run is refused (its trainer may be writing one).
  [[nodiscard]] Result<qint64> removeCheckpoints(const RunRecord& run);
  /// The bytes of the regular files under `folder` (a file: its size); -1 when it does not
  /// exist. An error names the host when it cannot be asked.
  [[nodiscard]] Result<qint64> measurePath(const RunFolder& folder);

 private:
  Result<SshSession*> session(const QString& alias);
  Result<RunDisk> measureFolder(const RunFolder& folder);
  Result<void> removeFolder(const RunFolder& folder, const QString& sub);

  CleanupOptions m_options;
  std::map<std::string, std::unique_ptr<SshSession>> m_sessions;
};

/// `bytes` for people: "812 B", "4.0 KiB", "1.5 MiB", "40.2 GiB" (powers of 1024).
QString humanBytes(qint64 bytes);

/// A refusal to remove `path` (a run folder that is empty, relative, the root or a home
/// folder, from a corrupt row); "" when it may be removed.
QString unsafeRunFolder(const QString& path);

/// What `gc --keep-best` keeps and frees in study `studyId`.
struct CheckpointGc {
  QList<qint64> kept;   ///< the best N trials' run ids, best first
  QList<qint64> freed;  ///< the runs whose checkpoints were removed
  qint64 freedBytes = 0;
  QStringList left;  ///< one line per run whose checkpoints could not be removed, and why
};

/// The trials of a study ranked by its first objective (its direction), best first; trials
/// without a finite value are left out.
[[nodiscard]] std::vector<RunRecord> rankedTrials(const StudyRecord& study,
                                                  std::vector<RunRecord> trials);

/// Keeps the checkpoints of the best `keep` trials of `study` (rankedTrials) and removes every
/// other trial's (running trials are skipped and named in `left`). With `dryRun` nothing is
/// removed: freedBytes is what would be.
[[nodiscard]] Result<CheckpointGc> keepBestCheckpoints(RunCleaner& cleaner,
                                                       const StudyRecord& study,
                                                       const std::vector<RunRecord>& trials,
                                                       int keep, bool dryRun = false);

}  // namespace shardscope::backend
