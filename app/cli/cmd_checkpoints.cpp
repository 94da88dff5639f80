// `checkpoints RUN`, `resume RUN --from STEP` and `export-checkpoint RUN --step N --to hf|peft
// DIR`: a run's checkpoints (backend/lifecycle/checkpoints.h, which the dashboard's Checkpoints
// dialog lists too), a new run from one of them, and one written as a Hugging Face folder or a
// PEFT adapter. docs/cli.md documents them and their --json output.
#include <QJsonArray>

#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "app/cli/cli_common.h"
#include "app/cli/launching.h"
#include "backend/lifecycle/checkpoints.h"

namespace shardscope::cli {

void addCheckpointVerbs(CLI::App& app, Globals& g);

namespace {

QJsonObject checkpointJson(const backend::CheckpointInfo& c) {
  QJsonObject eval;
  for (auto it = c.eval.begin(); it != c.eval.end(); ++it) eval[it.key()] = it.value();
  QJsonObject o{{"step", c.step},         {"kind", c.kind},   {"attempt", c.attempt},
                {"host", c.host},         {"path", c.path},   {"present", c.present},
                {"measured", c.measured}, {"bytes", c.bytes}, {"eval", eval}};
  if (!c.error.isEmpty()) o[QStringLiteral("error")] = c.error;
  return o;
}

std::string evalText(const backend::CheckpointInfo& c) {
  QStringList parts;
  for (auto it = c.eval.begin(); it != c.eval.end(); ++it)
    parts << it.key() + '=' + QString::number(it.value(), 'g', 5);
  return parts.isEmpty() ? std::string("-") : parts.join(' ').toStdString();
}

std::string sizeText(const backend::CheckpointInfo& c) {
  if (!c.measured) return "?";
  if (!c.present) return "removed";
  return backend::humanBytes(c.bytes).toStdString();
}

void checkpointsVerb(const Globals& g, const std::string& runArg) {
  auto reader = openReader(g);
  const auto run = findRun(reader, runArg);
  backend::RunCleaner cleaner;
  const auto all = orExit(backend::listCheckpoints(reader, cleaner, run));
  if (g.json) {
    QJsonArray list;
    qint64 total = 0;
    for (const auto& c : all) {
      list.append(checkpointJson(c));
      total += c.bytes;
    }
    printJson({{"run", run.name}, {"checkpoints", list}, {"bytes", total}});
    return;
  }
  if (all.empty()) {
    std::cout << "run " << run.name.toStdString()
              << " recorded no checkpoint (train.ckpt_every and train.ckpt_at_end write them)\n";
    return;
  }
  std::cout << std::left << std::setw(8) << "STEP" << std::setw(9) << "KIND" << std::setw(8)
            << "ATTEMPT" << std::setw(11) << "SIZE" << std::setw(28) << "EVAL"
            << "PATH\n";
  QStringList problems;
  for (const auto& c : all) {
    std::cout << std::setw(8) << c.step << std::setw(9) << c.kind.toStdString() << std::setw(8)
              << c.attempt << std::setw(11) << sizeText(c) << std::setw(28) << evalText(c)
              << (c.host.isEmpty() ? QString() : c.host + ':').toStdString() << c.path.toStdString()
              << '\n';
    if (!c.error.isEmpty()) problems << c.error;
  }
  problems.removeDuplicates();
  for (const QString& p : problems) std::cout << "note: " << p.toStdString() << '\n';
}

[[noreturn]] void resumeFromVerb(const Globals& g, const std::string& runArg, qint64 step) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const auto run = findRun(reader, runArg);
  const auto started = orExit(lifecycle(g).startFromCheckpoint(*store, run.id, step));
  if (!started.warning.empty()) std::cerr << "warning: " << started.warning << '\n';
  if (g.json) {
    printJson({{"id", started.id},
               {"name", started.name},
               {"run_dir", started.runDir},
               {"from", run.name},
               {"step", step}});
  } else {
    std::cout << started.id << '\n';
  }
  throw VerbExit{kExitOk};
}

struct ExportArgs {
  std::string run;
  qint64 step = -1;
  std::string to;
  std::string dir;
};

void exportCheckpointVerb(const Globals& g, const ExportArgs& a) {
  auto reader = openReader(g);
  const auto run = findRun(reader, a.run);
  backend::RunCleaner cleaner;
  const auto all = orExit(backend::listCheckpoints(reader, cleaner, run));
  const auto point = orExit(backend::findCheckpoint(all, run, a.step));
  const auto format =
      a.to == "peft" ? backend::ExportFormat::peftAdapter : backend::ExportFormat::huggingFace;
  const QString written = orExit(backend::exportCheckpoint(
      run, point, format, QString::fromStdString(a.dir), lifecycle(g).settings().trainerDir));
  if (g.json) {
    printJson({{"run", run.name},
               {"step", point.step},
               {"to", QString::fromStdString(a.to)},
               {"dir", written}});
    return;
  }
  std::cout << "wrote step " << point.step << " of " << run.name.toStdString() << " as "
            << (a.to == "peft" ? "a PEFT adapter" : "a Hugging Face folder") << " to "
            << written.toStdString() << '\n';
}

}  // namespace

void addCheckpointVerbs(CLI::App& app, Globals& g) {
  auto runArg = std::make_shared<std::string>();
  CLI::App* list = app.add_subcommand(
      "checkpoints", "List a run's checkpoints: step, kind, size on disk, evaluation at that step");
  list->add_option("RUN", *runArg, "Run id or name")->required();
  list->callback([&g, runArg] { checkpointsVerb(g, *runArg); });

  auto a = std::make_shared<ExportArgs>();
  CLI::App* exp = app.add_subcommand(
      "export-checkpoint",
      "Write a run's sharded checkpoint as a Hugging Face folder or a PEFT adapter");
  exp->add_option("RUN", a->run, "Run id or name")->required();
  exp->add_option("--step", a->step, "The checkpoint's step (see `checkpoints RUN`)")->required();
  exp->add_option("--to", a->to, "hf (model.safetensors and the base's files) or peft (adapter)")
      ->required()
      ->check(CLI::IsMember({"hf", "peft"}));
  exp->add_option("DIR", a->dir, "New or empty folder")->required();
  exp->callback([&g, a] { exportCheckpointVerb(g, *a); });
}

/// `resume RUN --from STEP`: called by the resume verb (cmd_run.cpp) when --from is given.
void resumeFromCheckpoint(const Globals& g, const std::string& runArg, qint64 step) {
  resumeFromVerb(g, runArg, step);
}

}  // namespace shardscope::cli
