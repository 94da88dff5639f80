// The experiment schema as a catalogue for forms: every "section.key" with its type, enum
// choices, default and doc line, generated from the schema's own field tables (so a form can
// never drift from the reader and writer), plus reading and writing one field of an Experiment
// as text with the same rules as the CLI's --set. Torch-free and Qt-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::spec {

/// The kind of editor a field needs.
enum class FieldType { integer, floating, boolean, string, list, enumeration, map };
std::string_view to_string(FieldType t);

struct FieldInfo {
  std::string path;     // "train.lr"
  std::string section;  // "train"
  std::string key;      // "lr"
  FieldType type = FieldType::string;
  bool list_of_int = false;  // list: elements are integers (else strings)
  bool is_unsigned = false;  // integer: never negative (train.seed)
  // enumeration: the canonical spellings, in schema order; string: the values it accepts when
  // they are a fixed set (lora.quantize, lora.quant_storage), else empty
  std::vector<std::string> choices;
  std::string default_text;  // get_field(Experiment{}, path)
  std::string doc;           // meaning and unit, from the schema table
};

/// The values lora.quantize accepts ("none", "nf4") and lora.quant_storage accepts ("uint8",
/// "bfloat16", "float16", "float32"): validation and the catalogue's choices share them.
const std::vector<std::string>& lora_quantize_values();
const std::vector<std::string>& lora_quant_storage_values();

/// Every typed field in file order ([search] is kept raw and is not listed).
const std::vector<FieldInfo>& field_catalog();
/// The entry for "section.key", or nullptr.
const FieldInfo* find_field(std::string_view path);
/// The typed section names in file order.
std::vector<std::string> catalog_sections();

/// A field's value as text: numbers and booleans as TOML writes them, strings raw (unquoted),
/// enums by canonical name, lists and maps as TOML inline arrays/tables. set_field(get_field(x))
/// leaves the experiment unchanged.
Result<std::string> get_field(const Experiment& exp, std::string_view path);
/// Sets a field from text exactly as `--set path=text` would (type and spelling errors are
/// returned, naming the field and the fix); range rules are not applied here (see
/// check_experiment), so a form can hold an invalid value and show why.
Result<void> set_field(Experiment& exp, std::string_view path, std::string_view text);

/// Reads TOML text into an Experiment without the range rules (syntax, type, spelling and
/// unknown-key errors still fail), resolving relative paths against `source_name`'s folder and
/// not checking that they exist: a form opens a file holding an out-of-range value and shows why.
Result<Experiment> read_experiment_unvalidated(std::string_view toml_text,
                                               const std::string& source_name);

/// One validation message and the field it names ("" when it names none).
struct FieldIssue {
  std::string field;    // "train.lr"
  std::string message;  // "train.lr: must be > 0 (got -0.1); use e.g. 3e-4"
};
/// Everything load_experiment and validate_for_launch would report for this experiment, each
/// message attached to the field it names. `check_paths`: also require the data and model paths
/// to exist (relative ones are read from the folder of exp.source).
std::vector<FieldIssue> check_experiment(const Experiment& exp, bool check_paths = true);

}  // namespace shardscope::spec
