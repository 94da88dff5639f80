#include "backend/lifecycle/demodata.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QSaveFile>
#include <QStandardPaths>

#include <algorithm>
#include <random>

namespace shardscope::backend {

bool isDemo(const spec::Experiment& exp) {
  return exp.experiment.name == "demo" && exp.model.arch == "tiny" && exp.data.format == "tokens";
}

Result<void> writeDemoData(const spec::Experiment& exp, int count) {
  const QString path = QString::fromStdString(exp.data.train_path);
  if (path.isEmpty())
    return fail("data.train_path: empty; the demo needs a file name for its data");
  if (!QDir().mkpath(QFileInfo(path).absolutePath())) {
    return fail("data.train_path: cannot create the folder of " + path.toStdString() +
                " for the demo data; make it writable or point data.train_path elsewhere");
  }
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    return fail("data.train_path: cannot write the demo data to " + path.toStdString() + ": " +
                file.errorString().toStdString());
  }
  const std::int64_t vocab = exp.model.tiny_vocab_size;
  std::mt19937_64 rng(exp.train.seed);
  std::uniform_int_distribution<std::int64_t> start(0, vocab - 1);
  std::uniform_int_distribution<std::int64_t> stride(1, 8);
  for (int i = 0; i < count; ++i) {
    const std::int64_t first = start(rng);
    const std::int64_t step = stride(rng);
    QByteArray line = "{\"input_ids\": [";
    for (std::int64_t t = 0; t < exp.data.seq_len; ++t) {
      if (t > 0) line += ", ";
      line += QByteArray::number((first + t * step) % vocab);
    }
    line += "]}\n";
    file.write(line);
  }
  if (!file.commit()) {
    return fail("data.train_path: writing the demo data to " + path.toStdString() +
                " failed: " + file.errorString().toStdString());
  }
  return ok();
}

namespace {

QString cleanPath(const std::string& path) {
  return QDir::cleanPath(QFileInfo(QString::fromStdString(path)).absoluteFilePath());
}

// The files of the shapes demo that make-demo-data writes into DIR (the train file's folder).
QStringList shapesDemoFiles(const spec::Experiment& exp) {
  const QDir dir = QFileInfo(QString::fromStdString(exp.data.train_path)).absoluteDir();
  QStringList files = {cleanPath(exp.data.train_path), dir.filePath("model/config.json"),
                       dir.filePath("model/tokenizer.json"),
                       dir.filePath("model/model.safetensors")};
  if (!exp.data.eval_path.empty()) files.append(cleanPath(exp.data.eval_path));
  if (!exp.eval.probes.empty()) files.append(cleanPath(exp.eval.probes));
  return files;
}

// launch.trainer as a program to run here: a path as it is; a bare name beside this program
// (the build tree and the package put shardtrain next to shardscope and shardscope-cli), else on
// PATH; empty when there is none.
QString demoTrainer(const spec::Experiment& exp) {
  QString name = QString::fromStdString(exp.launch.trainer);
  if (name.contains(QLatin1Char('/'))) return name;
  if (QCoreApplication::instance() != nullptr) {
    QString beside = QDir(QCoreApplication::applicationDirPath()).filePath(name);
    if (QFileInfo(beside).isExecutable()) return beside;
  }
  return QStandardPaths::findExecutable(name);
}

Result<bool> ensureShapesDemoData(const spec::Experiment& exp,
                                  const std::function<void()>& waiting) {
  const QStringList files = shapesDemoFiles(exp);
  const bool complete = std::all_of(files.begin(), files.end(),
                                    [](const QString& f) { return QFileInfo::exists(f); });
  if (complete) return false;
  const QString dir = QFileInfo(QString::fromStdString(exp.data.train_path)).absolutePath();
  const QString trainer = demoTrainer(exp);
  if (trainer.isEmpty()) {
    return fail("the shapes demo's data (" + dir.toStdString() +
                ") is missing and launch.trainer \"" + exp.launch.trainer +
                "\" is not on PATH to make it; run `shardtrain make-demo-data " +
                dir.toStdString() + " --train " + std::to_string(kShapesDemoTrain) + " --eval " +
                std::to_string(kShapesDemoEval) + "` or set launch.trainer to shardtrain's path");
  }
  const QStringList args = {QStringLiteral("make-demo-data"), dir,
                            QStringLiteral("--train"),        QString::number(kShapesDemoTrain),
                            QStringLiteral("--eval"),         QString::number(kShapesDemoEval)};
  QProcess make;
  make.start(trainer, args);
  constexpr int kMakeMs = 10 * 60 * 1000;  // 3,400 PNGs and a model: seconds; a loaded host more
  constexpr int kTickMs = 100;
  bool finished = false;
  if (make.waitForStarted()) {
    for (int waited = 0; !finished && waited < kMakeMs; waited += kTickMs) {
      finished = make.waitForFinished(kTickMs);
      if (!finished && waiting) waiting();
    }
  }
  if (!finished || make.exitStatus() != QProcess::NormalExit || make.exitCode() != 0) {
    const QString why = make.error() == QProcess::FailedToStart
                            ? make.errorString()
                            : QString::fromUtf8(make.readAllStandardOutput().right(400) +
                                                make.readAllStandardError().right(400));
    make.kill();
    return fail("the shapes demo's data: `" + trainer.toStdString() + " " +
                args.join(' ').toStdString() + "` failed: " + why.trimmed().toStdString() +
                "; run it yourself to see why");
  }
  for (const QString& file : files) {
    if (!QFileInfo::exists(file)) {
      return fail("the shapes demo's data: make-demo-data did not write " + file.toStdString() +
                  "; is launch.trainer (" + trainer.toStdString() + ") an older shardtrain?");
    }
  }
  return true;
}

}  // namespace

bool isShapesDemo(const spec::Experiment& exp) {
  if (exp.experiment.name != "shapes-vqa" || exp.model.arch != "qwen2_vl" ||
      exp.data.format != "chat" || exp.data.train_path.empty() || exp.model.path.empty())
    return false;
  const QFileInfo train(QString::fromStdString(exp.data.train_path));
  if (train.fileName() != QLatin1String("train.jsonl")) return false;
  const QDir dir = train.absoluteDir();
  const auto at = [&dir](const std::string& path, const char* name) {
    return cleanPath(path) == QDir::cleanPath(dir.filePath(QLatin1String(name)));
  };
  return at(exp.model.path, "model") &&
         (exp.data.eval_path.empty() || at(exp.data.eval_path, "eval.jsonl")) &&
         (exp.eval.probes.empty() || at(exp.eval.probes, "probes.jsonl"));
}

Result<bool> ensureDemoData(const spec::Experiment& exp, const std::function<void()>& waiting) {
  if (isShapesDemo(exp)) return ensureShapesDemoData(exp, waiting);
  if (!isDemo(exp) || QFileInfo::exists(QString::fromStdString(exp.data.train_path))) return false;
  auto written = writeDemoData(exp);
  if (!written) return fail(written.message());
  return true;
}

}  // namespace shardscope::backend
