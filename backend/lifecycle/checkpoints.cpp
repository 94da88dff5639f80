#include "backend/lifecycle/checkpoints.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTemporaryDir>

#include <algorithm>
#include <map>

#include "spec/experiment.h"

namespace shardscope::backend {

namespace {

std::string str(const QString& text) { return text.toStdString(); }

// Where attempt `attempt` of `run` wrote its files, as seen from here: {host, folder} candidates
// in the order to try. The current attempt's is its location's run_dir (remote for SSH and
// Slurm-over-SSH, else the local run directory); an earlier attempt's is the base folder (attempt
// 0) or the base with the suffix its kind of restart gave it ("-resume-K", "-retry-K",
// "-replan-K", "-attempt-K"), which is not stored, so each is tried.
std::vector<RunFolder> attemptFolders(const RunRecord& run, int attempt) {
  const QString kind = run.location.value("kind").toString();
  QString host;
  if (kind == QLatin1String("ssh")) {
    const QJsonArray hosts = run.location.value("hosts").toArray();
    host = hosts.isEmpty() ? run.location.value("host").toString() : hosts.first().toString();
  } else if (kind == QLatin1String("slurm")) {
    host = run.location.value("host").toString();
  }
  QString dir = run.location.value("run_dir").toString();
  if (dir.isEmpty()) dir = run.runDir;
  if (attempt == run.attempt) return {{host, dir}};
  static const QRegularExpression tail(QStringLiteral("-(resume|retry|replan|attempt)-[0-9]+$"));
  QString base = dir;
  if (const auto m = tail.match(dir); m.hasMatch()) base.truncate(m.capturedStart());
  if (attempt == 0) return {{host, base}};
  std::vector<RunFolder> folders;
  for (const char* suffix : {"resume", "retry", "replan", "attempt"})
    folders.push_back({host, base + '-' + suffix + '-' + QString::number(attempt)});
  return folders;
}

// Rank 0's `eval` metrics by step (the last event of a step wins: a resumed attempt's).
using EvalByStep = std::map<qint64, QMap<QString, double>>;

void addEval(EvalByStep& evals, const QJsonObject& event) {
  const qint64 step = event.value("step").toInteger(-1);
  if (step < 0) return;
  const QJsonObject metrics = event.value("metrics").toObject();
  QMap<QString, double> values;
  for (auto it = metrics.begin(); it != metrics.end(); ++it)
    if (it.value().isDouble()) values.insert(it.key(), it.value().toDouble());
  evals[step] = values;
}

// Measures `info` at each candidate folder until one holds it.
void measure(RunCleaner& cleaner, CheckpointInfo& info, const std::vector<RunFolder>& candidates,
             const QString& relative) {
  for (const RunFolder& folder : candidates) {
    const QString path = QDir::isAbsolutePath(relative) ? relative : folder.path + '/' + relative;
    if (info.path.isEmpty()) {
      info.host = folder.host;
      info.path = path;
    }
    auto bytes = cleaner.measurePath({folder.host, path});
    if (!bytes) {
      info.error = QString::fromStdString(bytes.message());
      return;
    }
    info.measured = true;
    if (*bytes < 0) continue;
    info.present = true;
    info.bytes = *bytes;
    info.host = folder.host;
    info.path = path;
    return;
  }
}

}  // namespace

Result<std::vector<CheckpointInfo>> listCheckpoints(RunReader& reader, RunCleaner& cleaner,
                                                    const RunRecord& run) {
  auto rows = reader.eventsOfKinds(
      run.id, 0, {QStringLiteral("ckpt"), QStringLiteral("eval"), QStringLiteral("sample")});
  if (!rows) return rows.error();
  EvalByStep evals;
  QSet<qint64> sampled;
  std::vector<CheckpointInfo> found;
  std::vector<QString> relative;
  for (const EventRow& row : *rows) {
    const QJsonObject event = QJsonDocument::fromJson(row.json).object();
    if (row.kind == QLatin1String("eval")) {
      addEval(evals, event);
      continue;
    }
    if (row.kind == QLatin1String("sample")) {
      sampled.insert(event.value("step").toInteger(-1));
      continue;
    }
    CheckpointInfo info;
    info.step = event.value("step").toInteger();
    info.kind = event.value("kind").toString(QStringLiteral("sharded"));
    info.attempt = row.attempt;
    const QString path = event.value("path").toString();
    if (path.isEmpty()) continue;
    // A checkpoint written again at the same step and place (a stop right after a periodic
    // one) is one checkpoint.
    const auto same = std::find_if(found.begin(), found.end(), [&](const CheckpointInfo& c) {
      return c.step == info.step && c.kind == info.kind && c.attempt == info.attempt;
    });
    if (same != found.end()) continue;
    found.push_back(info);
    relative.push_back(path);
  }
  const RunPlace place = cleaner.place(run);
  const bool otherMachine = !place.unreachable.isEmpty() && place.folders.empty();
  for (std::size_t i = 0; i < found.size(); ++i) {
    CheckpointInfo& info = found[i];
    if (const auto it = evals.find(info.step); it != evals.end()) info.eval = it->second;
    info.samples = sampled.contains(info.step);
    if (otherMachine) {
      info.path = QDir::isAbsolutePath(relative[i]) ? relative[i] : run.runDir + '/' + relative[i];
      info.error = place.unreachable;
      continue;
    }
    measure(cleaner, info, attemptFolders(run, info.attempt), relative[i]);
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const CheckpointInfo& a, const CheckpointInfo& b) {
                     if (a.attempt != b.attempt) return a.attempt < b.attempt;
                     return a.step < b.step;
                   });
  return found;
}

Result<CheckpointInfo> findCheckpoint(const std::vector<CheckpointInfo>& all, const RunRecord& run,
                                      qint64 step, const QString& kind) {
  QStringList there;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->kind != kind || !it->present) continue;
    if (it->step == step) return *it;
    there.prepend(QString::number(it->step));
  }
  there.removeDuplicates();
  return fail("run " + str(run.name) + " has no " + str(kind) + " checkpoint of step " +
              std::to_string(step) + " on disk" +
              (there.isEmpty() ? std::string(" (it has none: train.ckpt_every writes them)")
                               : " (steps on disk: " + str(there.join(", ")) + ")") +
              "; shardscope-cli checkpoints " + str(run.name) + " lists them");
}

Result<QString> exportCheckpoint(const RunRecord& run, const CheckpointInfo& checkpoint,
                                 ExportFormat format, const QString& outDir,
                                 const QString& trainerDir) {
  const std::string label = "run " + str(run.name);
  if (checkpoint.kind != QLatin1String("sharded")) {
    return fail(label + ": only a sharded checkpoint is exported (step " +
                std::to_string(checkpoint.step) + " is already a " + str(checkpoint.kind) +
                " folder: " + str(checkpoint.path) + ")");
  }
  if (!checkpoint.host.isEmpty()) {
    return fail(label + ": the checkpoint of step " + std::to_string(checkpoint.step) + " is on " +
                str(checkpoint.host) + " (" + str(checkpoint.path) +
                "): copy it to this machine, or run `shardtrain export` there");
  }
  if (!checkpoint.present) {
    return fail(label + ": the checkpoint of step " + std::to_string(checkpoint.step) +
                " is no longer on disk (" + str(checkpoint.path) + ")");
  }
  const QFileInfo out(outDir);
  if (out.exists() && (!out.isDir() || !QDir(outDir).isEmpty())) {
    return fail(str(outDir) + ": exists and is not an empty folder; give a new or empty folder");
  }
  const QString trial = QDir(run.runDir).filePath(QStringLiteral("trial.toml"));
  auto exp = spec::load_experiment(str(trial), {}, spec::LoadOptions{false});
  if (!exp) return fail(label + ": " + exp.message());
  if (format == ExportFormat::peftAdapter && !exp->lora.enabled) {
    return fail(label +
                " trained every weight (no [lora]): it has no PEFT adapter; export it as "
                "a Hugging Face folder");
  }
  QString trainer = QString::fromStdString(exp->launch.trainer);
  if (!trainer.contains('/')) {
    const QString sibling = trainerDir.isEmpty() ? QString() : QDir(trainerDir).filePath(trainer);
    trainer = QFileInfo(sibling).isExecutable() ? sibling : QStandardPaths::findExecutable(trainer);
  }
  if (trainer.isEmpty() || !QFileInfo(trainer).isExecutable()) {
    return fail(label + ": launch.trainer " + exp->launch.trainer +
                " is not an executable here (put shardtrain on PATH)");
  }
  // The trainer writes the whole folder; a PEFT adapter is its adapter/ part, moved into place.
  const QString absOut = out.absoluteFilePath();
  QTemporaryDir scratch(QFileInfo(absOut).absolutePath() + QStringLiteral("/.export-XXXXXX"));
  const QString target =
      format == ExportFormat::peftAdapter ? scratch.filePath(QStringLiteral("model")) : absOut;
  if (format == ExportFormat::peftAdapter && !scratch.isValid())
    return fail(str(absOut) + ": cannot create a folder beside it: " + str(scratch.errorString()));
  QProcess proc;
  proc.setProcessChannelMode(QProcess::MergedChannels);
  proc.setWorkingDirectory(run.runDir);
  proc.start(trainer, {QStringLiteral("export"), trial, QStringLiteral("--checkpoint"),
                       checkpoint.path, QStringLiteral("--out"), target});
  if (!proc.waitForStarted(30000))
    return fail(label + ": cannot start " + str(trainer) + ": " + str(proc.errorString()));
  proc.waitForFinished(-1);
  const QString output = QString::fromUtf8(proc.readAll()).trimmed();
  if (proc.exitStatus() != QProcess::NormalExit || proc.exitCode() != 0) {
    return fail(label + ": " + str(trainer) + " export failed (exit " +
                std::to_string(proc.exitCode()) + "): " + str(output.right(2000)));
  }
  if (format == ExportFormat::peftAdapter) {
    if (out.exists()) QDir(absOut).removeRecursively();
    if (!QDir().rename(scratch.filePath(QStringLiteral("model/adapter")), absOut))
      return fail(str(absOut) + ": cannot move the adapter there");
  }
  return absOut;
}

}  // namespace shardscope::backend
