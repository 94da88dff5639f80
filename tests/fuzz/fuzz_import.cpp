// The config importers (backend/import): the input's first byte picks the kind (accelerate YAML
// or JSON, HF TrainingArguments JSON or command line, DeepSpeed JSON), the rest is the file.
// A file the parsers refuse must be refused naming it; an accepted one must give one report entry
// per key with the key named, an error entry must name the key and keep the experiment out, and
// an experiment that comes out must write to TOML that the schema's reader takes.
#include <QByteArray>
#include <QSet>

#include "backend/import/configimport.h"
#include "spec/field_catalog.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

namespace {

constexpr const char* kName = "fuzz-config";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto kinds = backend::importKinds();
  const auto kind = kinds[data[0] % kinds.size()];
  const QByteArray text(reinterpret_cast<const char*>(data + 1), static_cast<qsizetype>(size - 1));
  auto result = backend::importConfigText(kind, text, QString::fromLatin1(kName));
  if (!result) {
    fuzz::expect_clear_error(result.message(), kName);
    return 0;
  }
  QSet<QString> keys;
  for (const auto& e : result->entries) {
    if (e.key.isEmpty()) fuzz::broken("a report entry without a key");
    if (keys.contains(e.key)) fuzz::broken("a key reported twice: " + e.key.toStdString());
    keys.insert(e.key);
    if (e.outcome == backend::ImportOutcome::error && result->experiment)
      fuzz::broken("an error entry with an experiment");
  }
  if (!result->experiment) {
    if (result->count(backend::ImportOutcome::error) == 0)
      fuzz::broken("no experiment and no error entry");
    if (!result->reportText().contains(QString::fromLatin1(kName)))
      fuzz::broken("the report of a refused file does not name it");
    return 0;
  }
  const std::string written = spec::write_experiment_toml(*result->experiment);
  auto again = spec::read_experiment_unvalidated(written, "written.toml");
  if (!again) fuzz::broken("an imported experiment does not read back: " + again.message());
  return 0;
}
