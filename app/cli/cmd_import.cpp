// `import accelerate|hf-trainer|deepspeed FILE [-o EXP.toml]`: another tool's training config as
// an experiment file (backend/import), with a report of every key of FILE. An unknown or
// contradictory key writes nothing and exits 2. docs/cli.md and docs/import.md document it.
#include <QFileInfo>
#include <QSaveFile>

#include <iostream>
#include <memory>
#include <string>

#include "app/cli/cli_common.h"
#include "backend/import/configimport.h"

namespace shardscope::cli {

void addImportVerb(CLI::App& app, Globals& g);

namespace {

struct ImportArgs {
  std::string kind;
  std::string file;
  std::string out;
  bool force = false;
};

// FILE's name with .toml, in the current folder: "accelerate_config.yaml" ->
// "accelerate_config.toml".
QString defaultOutput(const QString& file) {
  return QFileInfo(file).completeBaseName() + QStringLiteral(".toml");
}

void importVerb(const Globals& g, const ImportArgs& a) {
  const auto kind = orExit(backend::importKindFromName(QString::fromStdString(a.kind)), kExitUsage);
  const QString file = QString::fromStdString(a.file);
  const QString out = a.out.empty() ? defaultOutput(file) : QString::fromStdString(a.out);
  auto result = orExit(backend::importConfig(kind, file));
  if (result.ok() && QFileInfo::exists(out) && !a.force) {
    exitWith(kExitUsage, out.toStdString() + ": already exists; give another -o or --force");
  }
  QString written;
  if (result.ok()) {
    QSaveFile f(out);
    const std::string toml = spec::write_experiment_toml(*result.experiment);
    if (!f.open(QIODevice::WriteOnly) ||
        f.write(toml.data(), static_cast<qint64>(toml.size())) !=
            static_cast<qint64>(toml.size()) ||
        !f.commit()) {
      exitWith(kExitError, out.toStdString() + ": cannot write: " + f.errorString().toStdString());
    }
    written = QFileInfo(out).absoluteFilePath();
  }
  if (g.json) {
    QJsonObject o = result.reportJson();
    o.insert(QStringLiteral("written"), written.isEmpty() ? QJsonValue() : QJsonValue(written));
    printJson(o);
  } else {
    std::cout << result.reportText().toStdString();
    if (!written.isEmpty()) std::cout << "wrote " << written.toStdString() << "\n";
  }
  if (!result.ok()) {
    throw VerbExit{kExitUsage};
  }
}

}  // namespace

void addImportVerb(CLI::App& app, Globals& g) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* imp = app.add_subcommand(
      "import", "Write an experiment from an accelerate, HF Trainer or DeepSpeed config");
  imp->add_option("KIND", a->kind, "accelerate, hf-trainer or deepspeed")
      ->required()
      ->check(CLI::IsMember({"accelerate", "hf-trainer", "deepspeed"}));
  imp->add_option("FILE", a->file,
                  "accelerate config (YAML/JSON), TrainingArguments JSON or command line, "
                  "DeepSpeed JSON")
      ->required()
      ->check(CLI::ExistingFile);
  imp->add_option("-o,--output", a->out, "Experiment file to write; default: FILE's name .toml")
      ->type_name("EXP.toml");
  imp->add_flag("--force", a->force, "Replace an existing experiment file");
  imp->callback([&g, a] { importVerb(g, *a); });
}

}  // namespace shardscope::cli
