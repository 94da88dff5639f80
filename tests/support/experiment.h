// The tiny experiment that the launcher, CLI and dashboard tests and the live benchmark run: the
// tiny model (hidden size 16, one layer), 64 samples of 16 tokens, batch 4, no checkpoint at the
// end, `ranks` local ranks of `trainer` (the fake trainer or shardtrain). Also the quadratic
// program sweep the lifecycle and sweep-loop tests run.
#pragma once

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QString>

#include <map>

#include "tests/support/files.h"

namespace shardscope::testing {

struct TinyExperiment {
  QString name = QStringLiteral("tiny");     // [experiment] name; the file is DIR/NAME.toml
  QString trainer;                           // [launch] trainer
  int steps = 10;                            // [train] max_steps
  QByteArray train;                          // more [train] keys ("lr = -0.1\n")
  int ranks = 2;                             // [launch] nproc_per_node
  QByteArray launch = "kind = \"local\"\n";  // the rest of [launch]
  QByteArray tables;                         // tables after [launch] ([search] ...)
  bool absoluteData = false;                 // [data] train_path absolute (remote launches)
  QString fileName;                          // the TOML's file name, when not NAME.toml
};

/// Writes DIR/train.jsonl (when it does not exist) and the experiment's TOML in DIR; returns the
/// TOML's path, or "" when a file cannot be written.
inline QString writeExperiment(const QString& dir, const TinyExperiment& e) {
  const QString data = QDir(dir).filePath(QStringLiteral("train.jsonl"));
  if (!QFile::exists(data)) {
    QByteArray lines;
    for (int i = 0; i < 64; ++i) {
      QByteArray line = "{\"input_ids\": [";
      for (int t = 0; t < 16; ++t) line += (t ? ", " : "") + QByteArray::number((i + 3 * t) % 256);
      lines += line + "]}\n";
    }
    if (!writeAll(data, lines)) return {};
  }
  const QString path =
      QDir(dir).filePath(e.fileName.isEmpty() ? e.name + QStringLiteral(".toml") : e.fileName);
  const QByteArray toml = "[experiment]\nname = \"" + e.name.toUtf8() +
                          "\"\n[model]\narch = \"tiny\"\ntiny_hidden_size = 16\ntiny_layers = 1\n"
                          "[data]\ntrain_path = \"" +
                          (e.absoluteData ? data.toUtf8() : QByteArray("train.jsonl")) +
                          "\"\nseq_len = 16\n[train]\nmax_steps = " + QByteArray::number(e.steps) +
                          "\nbatch_size = 4\nckpt_at_end = false\n" + e.train +
                          "[launch]\nnproc_per_node = " + QByteArray::number(e.ranks) +
                          "\ntrainer = \"" + e.trainer.toUtf8() + "\"\n" + e.launch + e.tables;
  return writeAll(path, toml) ? path : QString();
}

/// A sweep of program trials with no trainer: DIR/obj.py prints (x - 1)^2 as the objective of a
/// random search over x in [-5, 5] (study "quadstudy", seed 1, one trial at a time); the
/// experiment is DIR/quad.toml, whose path is returned ("" when a file cannot be written).
inline QString writeQuadSweep(const QString& dir, int trials) {
  const QByteArray program = R"(import json, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
f = (float(args["x"]) - 1) ** 2
print(json.dumps({"ev": "eval", "step": 1, "metrics": {"objective": f}}), flush=True)
print(json.dumps({"ev": "done", "status": "complete", "objective": f}), flush=True)
)";
  const QByteArray toml = R"([experiment]
name = "quad"

[search]
name = "quadstudy"
program = ["python3", "obj.py"]
sampler = "random"
seed = 1
n_trials = )" + QByteArray::number(trials) +
                          R"(
concurrency = 1
objectives = {objective = "minimize"}

[search.space.x]
type = "float"
low = -5.0
high = 5.0
)";
  const QString path = QDir(dir).filePath(QStringLiteral("quad.toml"));
  return writeAll(QDir(dir).filePath(QStringLiteral("obj.py")), program) && writeAll(path, toml)
             ? path
             : QString();
}

/// The program trial of the `sweep` tests, written to DIR/obj.py (false when it cannot be):
/// f(x, y) = (x-1)^2 + (y+2)^2, reported as an `eval` of f + 1/step at steps 1..`steps`,
/// $TRIAL_SLEEP seconds apart (default `sleepS`), then `done` with f. It appends "NUMBER f" to
/// DIR/values.txt (what the program computed; quadTrialValues reads it) and writes its pid to
/// DIR/pids/NUMBER, so a test can kill one trial.
inline bool writeQuadTrial(const QString& dir, int steps, double sleepS) {
  const QByteArray program = R"(import json, os, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
x, y = float(args["x"]), float(args["y"])
f = (x - 1) ** 2 + (y + 2) ** 2
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "values.txt"), "a") as out:
    out.write("%s %r\n" % (os.environ["SHARDSCOPE_TRIAL"], f))
os.makedirs(os.path.join(here, "pids"), exist_ok=True)
with open(os.path.join(here, "pids", os.environ["SHARDSCOPE_TRIAL"]), "w") as out:
    out.write(str(os.getpid()))
for step in range(1, @STEPS@ + 1):
    print(json.dumps({"ev": "eval", "step": step, "metrics": {"objective": f + 1.0 / step}}),
          flush=True)
    time.sleep(float(os.environ.get("TRIAL_SLEEP", "@SLEEP@")))
print(json.dumps({"ev": "done", "status": "complete", "objective": f}), flush=True)
)";
  return writeAll(QDir(dir).filePath(QStringLiteral("obj.py")),
                  QByteArray(program)
                      .replace("@STEPS@", QByteArray::number(steps))
                      .replace("@SLEEP@", QByteArray::number(sleepS)));
}

/// The trials' values that writeQuadTrial's program computed, by trial number.
inline std::map<int, double> quadTrialValues(const QString& dir) {
  std::map<int, double> computed;
  for (const QByteArray& line :
       readAll(QDir(dir).filePath(QStringLiteral("values.txt"))).split('\n')) {
    const QList<QByteArray> parts = line.split(' ');
    if (parts.size() == 2) computed[parts[0].toInt()] = parts[1].toDouble();
  }
  return computed;
}

/// The start of an experiment on the demo's tiny model as the shardtrain trial and PBT tests train
/// it: [experiment] `name`, [model] (vocabulary 256, hidden size 32, 2 layers, 4 heads) and [data]
/// (`dataDir`/train.jsonl of 32-token lines, also the evaluation set: what
/// backend/lifecycle/demodata.h writes, or `sweep` for an experiment named "demo"). The caller
/// appends [train] and what follows.
inline QByteArray tinyDemoExperiment(const QByteArray& name, const QByteArray& dataDir) {
  const QByteArray data = "\"" + dataDir + "/train.jsonl\"\n";
  return "[experiment]\nname = \"" + name +
         "\"\n[model]\narch = \"tiny\"\ntiny_vocab_size = 256\ntiny_hidden_size = 32\n"
         "tiny_layers = 2\ntiny_heads = 4\n[data]\ntrain_path = " +
         data + "eval_path = " + data + "format = \"tokens\"\nseq_len = 32\n";
}

}  // namespace shardscope::testing
