#include "backend/lifecycle/demodata.h"

#include <QDir>
#include <QFileInfo>
#include <QSaveFile>

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

Result<bool> ensureDemoData(const spec::Experiment& exp) {
  if (!isDemo(exp) || QFileInfo::exists(QString::fromStdString(exp.data.train_path))) return false;
  auto written = writeDemoData(exp);
  if (!written) return fail(written.message());
  return true;
}

}  // namespace shardscope::backend
