// `export-study NAME --to optuna|tensorboard PATH` and `export-run RUN --to tensorboard DIR`:
// a study or a run in the formats Optuna, optuna-dashboard and TensorBoard read
// (backend/export). docs/cli.md documents both verbs and their --json output.
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>

#include <iostream>
#include <memory>
#include <string>

#include "app/cli/cli_common.h"
#include "backend/export/optunajournal.h"
#include "backend/export/tensorboardexport.h"
#include "backend/sweep/study.h"

namespace shardscope::cli {

void addExportToVerbs(CLI::App& app, Globals& g);

namespace {

struct ExportArgs {
  std::string name;
  std::string to;
  std::string path;
};

// The target must be new: an existing journal would merge two studies, a folder with event
// files would show every curve twice. Exits 2 naming the path and the fix.
void refuseExisting(const QString& path, bool folder) {
  const QFileInfo info(path);
  if (!info.exists()) return;
  if (!folder) {
    exitWith(kExitUsage, path.toStdString() + ": already exists; give a new file name");
  }
  if (!info.isDir()) {
    exitWith(kExitUsage, path.toStdString() + ": is a file; give a folder to write into");
  }
  if (!QDir(path).isEmpty()) {
    exitWith(kExitUsage, path.toStdString() + ": is not empty; give a new or empty folder");
  }
}

QJsonObject tensorBoardJson(const backend::TensorBoardExport& e) {
  return {{"files", QJsonArray::fromStringList(e.files)},
          {"scalars", e.scalars},
          {"hparams", e.hparams}};
}

void studyToOptuna(const Globals& g, search::Study& study, backend::RunReader& reader,
                   const QString& path) {
  const auto written = orExit(backend::writeOptunaJournal(study, reader, path));
  const int total =
      written.complete + written.pruned + written.fail + written.running + written.waiting;
  if (g.json) {
    printJson({{"study", study.name()},
               {"path", QFileInfo(path).absoluteFilePath()},
               {"trials", total},
               {"complete", written.complete},
               {"pruned", written.pruned},
               {"fail", written.fail},
               {"running", written.running},
               {"waiting", written.waiting}});
    return;
  }
  std::cout << "wrote study " << study.name().toStdString() << " (" << total
            << " trials: " << written.complete << " complete, " << written.pruned << " pruned, "
            << written.fail << " fail, " << written.running << " running, " << written.waiting
            << " waiting) to " << path.toStdString() << "\nopen it with optuna.load_study("
            << "study_name=\"" << study.name().toStdString()
            << "\", storage=optuna.storages.JournalStorage("
               "optuna.storages.journal.JournalFileBackend(\""
            << path.toStdString() << "\")))\n";
}

// Every trial's run into DIR/<run name>/ and the HParams experiment into DIR.
void studyToTensorBoard(const Globals& g, search::Study& study, backend::RunReader& reader,
                        const QString& dir) {
  const auto written = orExit(backend::exportStudyToTensorBoard(study, reader, dir));
  if (g.json) {
    QJsonArray runs;
    for (const auto& [name, e] : written.runs) {
      QJsonObject o = tensorBoardJson(e);
      o[QStringLiteral("run")] = name;
      runs.append(o);
    }
    printJson({{"study", study.name()},
               {"dir", QFileInfo(dir).absoluteFilePath()},
               {"experiment", written.experimentFile},
               {"runs", runs},
               {"scalars", written.scalars}});
    return;
  }
  std::cout << "wrote " << written.runs.size() << " trials of study " << study.name().toStdString()
            << " (" << written.scalars << " scalars) to " << dir.toStdString()
            << "\nview it with: tensorboard --logdir " << dir.toStdString() << '\n';
}

void exportStudyVerb(const Globals& g, const ExportArgs& a) {
  const QString path = QString::fromStdString(a.path);
  refuseExisting(path, a.to == "tensorboard");
  auto reader = openReader(g);  // exits 1 when the run log does not exist (openStore creates)
  auto store = openStore(g);
  auto study = orExit(search::Study::open(*store, QString::fromStdString(a.name)));
  if (a.to == "optuna") {
    studyToOptuna(g, study, reader, path);
  } else {
    studyToTensorBoard(g, study, reader, path);
  }
}

void exportRunVerb(const Globals& g, const ExportArgs& a) {
  const QString dir = QString::fromStdString(a.path);
  refuseExisting(dir, true);
  auto reader = openReader(g);
  const auto run = findRun(reader, a.name);
  const auto e = orExit(backend::exportRunToTensorBoard(reader, run, dir));
  if (g.json) {
    QJsonObject o = tensorBoardJson(e);
    o[QStringLiteral("run")] = run.name;
    o[QStringLiteral("dir")] = QFileInfo(dir).absoluteFilePath();
    printJson(o);
    return;
  }
  std::cout << "wrote run " << run.name.toStdString() << " (" << e.scalars << " scalars"
            << (e.hparams ? ", hparams" : "") << ") to " << dir.toStdString()
            << "\nview it with: tensorboard --logdir " << dir.toStdString() << '\n';
}

}  // namespace

void addExportToVerbs(CLI::App& app, Globals& g) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* study = app.add_subcommand(
      "export-study", "Write a study as an Optuna journal file or TensorBoard event files");
  study->add_option("NAME", a->name, "Study name")->required();
  study->add_option("--to", a->to, "optuna (a journal FILE) or tensorboard (a folder)")
      ->required()
      ->check(CLI::IsMember({"optuna", "tensorboard"}));
  study->add_option("PATH", a->path, "New journal file (optuna) or new or empty folder")
      ->required();
  study->callback([&g, a] { exportStudyVerb(g, *a); });

  CLI::App* run =
      app.add_subcommand("export-run", "Write a run's metrics as TensorBoard event files");
  run->add_option("RUN", a->name, "Run id or name")->required();
  run->add_option("--to", a->to, "tensorboard")->required()->check(CLI::IsMember({"tensorboard"}));
  run->add_option("DIR", a->path, "New or empty folder")->required();
  run->callback([&g, a] { exportRunVerb(g, *a); });
}

}  // namespace shardscope::cli
