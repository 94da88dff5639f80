// ProgramLauncher: any program as a search trial (`[search] program = ["python3", "obj.py"]`).
// One process in its own session on this machine, working directory the run directory. Its raw
// stdout and stderr go to files in the run directory (durable, never a pipe to the backend); the
// handle normalises them into the same files shardtrain's ranks write, so RunMonitor ingests a
// program trial unchanged:
//   program-stdout.log  -> events-rank-0.jsonl: each line that is a JSON object, with the
//                          envelope fields it omits added (v 1, rank 0, seq in arrival order,
//                          t the arrival time); every other line -> rank-0.log
//   program-stderr.log  -> rank-0.log
// The normaliser's read offsets are kept in program-normalise.json, so a handle from attach()
// continues where the last one stopped.
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>
#include <QTimer>

#include <memory>
#include <vector>

#include "backend/launch/launcher.h"
#include "backend/launch/locallauncher.h"
#include "spec/result.h"

namespace shardscope::backend {

/// `[search] program` as an argv to start: the executable made absolute (a name with a slash,
/// or a file beside the experiment, resolves against `experimentDir`; a bare name is looked up
/// on PATH) and every later argument that names an existing file relative to `experimentDir`
/// made absolute (the program runs in the run directory). Errors name search.program.
[[nodiscard]] Result<QStringList> resolveProgram(const std::vector<std::string>& program,
                                                 const QString& experimentDir);

/// One stdout line of a trial program as an event line for events-rank-0.jsonl: a JSON object
/// gets the envelope fields it lacks ("v":1, "rank":0, "seq":`seq`, "t":`t`), its own text kept
/// verbatim. Empty when the line is not a JSON object (it is a log line then).
/// Bare NaN, Infinity and -Infinity (as Python's json writes them) become null: the protocol's
/// non-finite number.
QByteArray normaliseProgramLine(const QByteArray& line, qint64 seq, double t);
/// `text` with NaN, Infinity and -Infinity outside JSON strings replaced by null.
QByteArray nonFiniteToNull(const QByteArray& text);

/// Starts a trial program (launch kind "program"). LaunchRequest::trainerArgs are the trial's
/// arguments after the program's own, extraEnv comes on top of this process's environment and
/// launch.env; SHARDSCOPE_RUN_DIR is set to the run directory; launch.grace_s is the
/// SIGTERM-to-SIGKILL grace of stop().
class ProgramLauncher final : public Launcher {
 public:
  /// `program`: the argv from resolveProgram().
  explicit ProgramLauncher(QStringList program, int attachGraceS = 5)
      : m_program(std::move(program)), m_attachGraceS(attachGraceS) {}

  QString kind() const override { return QStringLiteral("program"); }
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> start(const LaunchRequest& request) override;
  [[nodiscard]] Result<std::unique_ptr<RunHandle>> attach(const RunLocation& location) override;

 private:
  QStringList m_program;
  int m_attachGraceS;
};

/// A program trial: a LocalRunHandle for the process plus the normaliser that turns its raw
/// output into events-rank-0.jsonl and rank-0.log before anyone reads them.
class ProgramRunHandle final : public RunHandle {
  Q_OBJECT
 public:
  ProgramRunHandle(const RunLocation& location, int graceS, QObject* parent = nullptr);
  ~ProgramRunHandle() override;

  RunLocation location() const override { return m_inner->location(); }
  /// The process's state; normalises everything it wrote first, so a reader that sees the
  /// rank exited and then reads the files gets every line.
  QList<RankState> ranks() const override;
  Result<QByteArray> readEvents(int rank, qint64 offset, qint64 maxBytes) override;
  Result<QByteArray> readLog(int rank, qint64 offset, qint64 maxBytes) override;
  Result<RankFileStat> statRankFile(int rank, RankFile file) override;
  void stop() override { m_inner->stop(); }
  void kill() override { m_inner->kill(); }

 private:
  /// Normalises what is new in the raw files; `final`: the process has exited, so a last line
  /// without a newline is taken too. True when it wrote anything.
  bool drain(bool final) const;
  void onPoll();

  std::unique_ptr<LocalRunHandle> m_inner;
  QString m_runDir;
  QTimer m_pollTimer;
  // The normaliser's state (drain() runs from const readers too).
  mutable qint64 m_stdoutOffset = 0;
  mutable qint64 m_stderrOffset = 0;
  mutable qint64 m_seq = 0;
  mutable bool m_drained = false;  // the final drain after exit is done
};

}  // namespace shardscope::backend
