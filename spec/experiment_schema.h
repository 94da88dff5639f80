// Internal to spec: the experiment schema as data. One table of fields per section
// (key, member, meaning and unit) drives the TOML reader, the writer and the unknown-key check,
// so the three can never disagree. Not a public header: include experiment.h instead.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "spec/enum_names.h"
#include "spec/experiment.h"

namespace shardscope::spec::detail {

/// A pointer to one field of section struct S, of any type the schema uses.
template <class S>
using Member = std::variant<std::int64_t S::*, int S::*, std::uint64_t S::*, double S::*, bool S::*,
                            std::string S::*, std::vector<std::string> S::*, std::vector<int> S::*,
                            std::map<std::string, std::string> S::*, ShardStrategy S::*,
                            WrapPolicy S::*, BackwardPrefetch S::*, PrecisionMode S::*, DType S::*,
                            LrSchedule S::*, LaunchKind S::*>;

/// One TOML key of a section: its name, the struct member and a one-line meaning with unit.
template <class S>
struct Field {
  std::string_view key;
  Member<S> member;
  std::string_view doc;
};

std::span<const Field<ExperimentSection>> section_fields(const ExperimentSection&);
std::span<const Field<ModelSection>> section_fields(const ModelSection&);
std::span<const Field<DataSection>> section_fields(const DataSection&);
std::span<const Field<TrainSection>> section_fields(const TrainSection&);
std::span<const Field<ShardSection>> section_fields(const ShardSection&);
std::span<const Field<LoraSection>> section_fields(const LoraSection&);
std::span<const Field<EvalSection>> section_fields(const EvalSection&);
std::span<const Field<TraceSection>> section_fields(const TraceSection&);
std::span<const Field<LaunchSection>> section_fields(const LaunchSection&);
std::span<const Field<NotifySection>> section_fields(const NotifySection&);

/// Calls f(name, section) for every typed section in file order ([search] is kept raw).
template <class E, class F>
void for_each_section(E& exp, F&& f) {
  f(std::string_view("experiment"), exp.experiment);
  f(std::string_view("model"), exp.model);
  f(std::string_view("data"), exp.data);
  f(std::string_view("train"), exp.train);
  f(std::string_view("shard"), exp.shard);
  f(std::string_view("lora"), exp.lora);
  f(std::string_view("eval"), exp.eval);
  f(std::string_view("trace"), exp.trace);
  f(std::string_view("launch"), exp.launch);
  f(std::string_view("notify"), exp.notify);
}

/// The section names a file may contain, [search] included.
std::span<const std::string_view> section_names();
/// True when `key` is a field of section `section` (both without dots).
bool is_field(std::string_view section, std::string_view key);
/// Every "section.key" of the schema.
std::vector<std::string> all_field_paths();

using spec::EnumName;  // the first spelling of a value is what to_string returns
std::span<const EnumName<ShardStrategy>> enum_names(ShardStrategy);
std::span<const EnumName<WrapPolicy>> enum_names(WrapPolicy);
std::span<const EnumName<BackwardPrefetch>> enum_names(BackwardPrefetch);
std::span<const EnumName<PrecisionMode>> enum_names(PrecisionMode);
std::span<const EnumName<DType>> enum_names(DType);
std::span<const EnumName<LrSchedule>> enum_names(LrSchedule);
std::span<const EnumName<LaunchKind>> enum_names(LaunchKind);

/// Where each dotted key came from, for messages: "demo.toml:12:5" or "--set train.lr=1".
class Locator {
 public:
  /// `parsed`: the source is a TOML text with lines, so a key it lacks is reported at
  /// "FILE:1:1" (an editor jumps there); otherwise (an in-memory experiment) at "FILE".
  explicit Locator(std::string source, bool parsed = false)
      : m_source(std::move(source)), m_parsed(parsed) {}
  void set(std::string dotted, std::string where) { m_where[std::move(dotted)] = std::move(where); }
  /// The key's own place, else its enclosing table's, else the file name alone.
  std::string at(std::string_view dotted) const;
  const std::string& source() const { return m_source; }

 private:
  std::string m_source;
  bool m_parsed = false;
  std::map<std::string, std::string, std::less<>> m_where;
};

/// Collects every problem of an experiment, one line each: "WHERE: FIELD: WHAT; FIX".
class Diagnostics {
 public:
  void add(std::string line) { m_lines.push_back(std::move(line)); }
  /// "WHERE: FIELD: MESSAGE" with WHERE from the locator. Skipped for a field whose value could
  /// not be read (see end_reading): its range rules would judge the default, not the file.
  void field(const Locator& loc, std::string_view dotted, std::string_view message);
  /// Marks the end of reading: fields reported so far are left out of later messages.
  void end_reading() { m_unread = m_reported; }
  bool empty() const { return m_lines.empty(); }
  /// All lines joined by newlines.
  std::string text() const;

 private:
  std::vector<std::string> m_lines;
  std::set<std::string, std::less<>> m_reported;
  std::set<std::string, std::less<>> m_unread;
};

/// Parses TOML text, applies overrides and fills `exp` (no range validation). Syntax, type,
/// unknown-key and override errors go to `diag`; `loc` learns where every key was.
void read_experiment_toml(std::string_view text, const std::string& source_name,
                          const std::vector<std::string>& overrides, Experiment& exp, Locator& loc,
                          Diagnostics& diag);

/// Range and cross-field checks of every section ([launch] included), no file system access.
void validate_fields(const Experiment& exp, const Locator& loc, Diagnostics& diag);
/// The [launch] rules (experiment_launch.cpp).
void validate_launch(const Experiment& exp, const Locator& loc, Diagnostics& diag);
/// True for a valid environment variable name: letters, digits and _, not starting with a digit.
bool is_identifier(std::string_view s);
/// Counts one read of an experiment file (experiment_file_reads, experiment_query.h).
void note_experiment_file_read();
/// Data and model paths: resolved against `base_dir` when relative (exp is updated to absolute
/// paths) and, when `check`, required to exist.
void resolve_paths(Experiment& exp, const std::string& base_dir, bool check, const Locator& loc,
                   Diagnostics& diag);

/// A double as the shortest text that reads back exactly ("0.0003", "1e-08", "2.0").
std::string format_double(double v);
/// Levenshtein distance, for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b);
/// The closest candidate within a small distance, or "" when nothing is close.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);
/// ASCII lowercase.
std::string lower(std::string_view s);

}  // namespace shardscope::spec::detail
