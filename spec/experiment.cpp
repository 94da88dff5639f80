// Loading an experiment (read, resolve paths, validate), the world-size rules and the
// precision table. The TOML reader is experiment_toml.cpp, the writer experiment_write.cpp.
#include "spec/experiment.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "spec/experiment_query.h"
#include "spec/experiment_schema.h"

namespace shardscope::spec {
namespace {

namespace fs = std::filesystem;

// Experiment files read in this process (experiment_file_reads()).
std::atomic<std::uint64_t> g_file_reads{0};

// The folder relative paths are read from: the experiment file's own folder.
std::string base_dir_of(const std::string& source_name) {
  std::error_code ec;
  if (source_name.empty()) return fs::current_path(ec).string();
  return fs::absolute(fs::path(source_name), ec).parent_path().string();
}

std::string resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty()) return path;
  fs::path p(path);
  if (path == "~" || path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    if (!home) return path;
    p = fs::path(home) / path.substr(std::min<std::size_t>(path.size(), 2));
  }
  if (p.is_relative()) p = fs::path(base_dir) / p;
  return p.lexically_normal().string();
}

}  // namespace

namespace detail {

void resolve_paths(Experiment& exp, const std::string& base_dir, bool check, const Locator& loc,
                   Diagnostics& diag) {
  exp.data.train_path = resolve(exp.data.train_path, base_dir);
  exp.data.eval_path = resolve(exp.data.eval_path, base_dir);
  exp.model.path = resolve(exp.model.path, base_dir);
  exp.eval.probes = resolve(exp.eval.probes, base_dir);
  if (!check) return;
  const std::string relative =
      " (relative paths are read from " + base_dir + ", the experiment file's folder)";
  std::error_code ec;
  for (const auto& [field, path] : {std::pair{"data.train_path", &exp.data.train_path},
                                    std::pair{"data.eval_path", &exp.data.eval_path},
                                    std::pair{"eval.probes", &exp.eval.probes}}) {
    if (path->empty()) continue;
    if (!fs::exists(*path, ec)) {
      diag.field(loc, field, "file " + *path + " does not exist; fix the path" + relative);
    } else if (fs::is_directory(*path, ec)) {
      diag.field(loc, field, *path + " is a folder; name the JSONL file inside it");
    }
  }
  if (exp.model.path.empty() || exp.model.arch == "tiny") return;
  if (!fs::is_directory(exp.model.path, ec)) {
    diag.field(loc, "model.path",
               "folder " + exp.model.path + " does not exist; fix the path" + relative);
  } else if (!fs::exists(fs::path(exp.model.path) / "config.json", ec)) {
    diag.field(loc, "model.path",
               "folder " + exp.model.path +
                   " has no config.json; point it at a Hugging Face checkpoint folder");
  }
}

}  // namespace detail

Result<Experiment> parse_experiment(std::string_view toml_text, const std::string& source_name,
                                    const std::vector<std::string>& overrides,
                                    const LoadOptions& options) {
  Experiment exp;
  exp.source = source_name;
  detail::Locator loc(source_name, true);
  detail::Diagnostics diag;
  detail::read_experiment_toml(toml_text, source_name, overrides, exp, loc, diag);
  diag.end_reading();
  detail::resolve_paths(exp, base_dir_of(source_name), options.check_paths, loc, diag);
  detail::validate_fields(exp, loc, diag);
  if (!diag.empty()) return fail(diag.text());
  return exp;
}

Result<Experiment> parse_experiment(std::string_view toml_text, const std::string& source_name,
                                    const std::vector<std::string>& overrides) {
  return parse_experiment(toml_text, source_name, overrides, LoadOptions{});
}

Result<Experiment> load_experiment(const std::string& path,
                                   const std::vector<std::string>& overrides,
                                   const LoadOptions& options) {
  detail::note_experiment_file_read();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(path + ": cannot open the experiment file (" +
                std::string(std::error_code(errno, std::generic_category()).message()) +
                "); check the path");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_experiment(text.str(), path, overrides, options);
}

Result<Experiment> load_experiment(const std::string& path,
                                   const std::vector<std::string>& overrides) {
  return load_experiment(path, overrides, LoadOptions{});
}

namespace detail {
void note_experiment_file_read() { g_file_reads.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

std::uint64_t experiment_file_reads() { return g_file_reads.load(std::memory_order_relaxed); }

Result<void> check_experiment_paths(const Experiment& exp) {
  Experiment checked = exp;  // resolving resolved paths again changes nothing
  detail::Locator loc(exp.source);
  detail::Diagnostics diag;
  detail::resolve_paths(checked, base_dir_of(exp.source), true, loc, diag);
  if (!diag.empty()) return fail(diag.text());
  return ok();
}

Result<Experiment> with_overrides(const Experiment& base, const std::vector<std::string>& overrides,
                                  const LoadOptions& options) {
  // The written form reads back as the same experiment (Experiment::operator==), so the
  // overrides apply as they would to the file. Its lines are not the file's: the paths are
  // checked apart, so that their messages name no line.
  LoadOptions noPaths = options;
  noPaths.check_paths = false;
  auto exp = parse_experiment(write_experiment_toml(base), base.source, overrides, noPaths);
  if (!exp || !options.check_paths) return exp;
  if (auto checked = check_experiment_paths(*exp); !checked) return checked.error();
  return exp;
}

PrecisionDTypes resolve_precision(const ShardSection& shard) {
  PrecisionDTypes p;  // all fp32, no autocast
  switch (shard.precision) {
    case PrecisionMode::fp32:
      break;
    case PrecisionMode::bf16:
      p.param = p.reduce = p.buffer = DType::bf16;
      break;
    case PrecisionMode::fp16_autocast:
      p.autocast = true;
      p.autocast_dtype = DType::fp16;
      p.grad_scaler = true;
      break;
    case PrecisionMode::bf16_autocast:
      p.autocast = true;
      p.autocast_dtype = DType::bf16;
      break;
    case PrecisionMode::bf16_buffers_autocast:
      p.param = DType::bf16;
      p.autocast = true;
      p.autocast_dtype = DType::bf16;
      break;
    case PrecisionMode::custom:
      p.param = shard.param_dtype;
      p.reduce = shard.reduce_dtype;
      p.buffer = shard.buffer_dtype;
      p.grad_scaler = p.param == DType::fp16 || p.reduce == DType::fp16;
      break;
  }
  return p;
}

namespace {

// The batch split: every rank is a data-parallel rank, so batch_size must be a whole number of
// micro_batch_size x world_size.
void check_batch(const TrainSection& t, int world, const detail::Locator& loc,
                 detail::Diagnostics& diag) {
  const std::string w = std::to_string(world);
  if (t.micro_batch_size == 0) {
    if (t.batch_size % world != 0 || t.batch_size < world) {
      const std::int64_t up = (t.batch_size / world + 1) * world;
      diag.field(loc, "train.batch_size",
                 std::to_string(t.batch_size) + " samples do not split evenly over " + w +
                     " ranks; use a multiple of " + w + " (e.g. " + std::to_string(up) +
                     ") or set train.micro_batch_size");
    }
    return;
  }
  const std::int64_t per_step = t.micro_batch_size * world;
  if (t.batch_size % per_step != 0) {
    diag.field(loc, "train.micro_batch_size",
               "train.batch_size (" + std::to_string(t.batch_size) +
                   ") must be a multiple of micro_batch_size x world size (" +
                   std::to_string(t.micro_batch_size) + " x " + w + " = " +
                   std::to_string(per_step) + "); change batch_size or micro_batch_size");
  }
}

void check_hybrid(int world, int local, const detail::Locator& loc, detail::Diagnostics& diag) {
  const std::string w = std::to_string(world);
  const std::string l = std::to_string(local);
  if (world % local != 0) {
    diag.field(loc, "shard.strategy",
               "HYBRID_SHARD needs the world size (" + w +
                   ") to be a multiple of launch.nproc_per_node (" + l +
                   "); every node must run the same number of ranks");
  } else if (local == 1) {
    diag.field(loc, "shard.strategy",
               "HYBRID_SHARD with one rank per node shards nothing; use NO_SHARD, or run more "
               "ranks per node (launch.nproc_per_node)");
  } else if (world == local) {
    diag.field(loc, "shard.strategy",
               "HYBRID_SHARD on a single node (world size " + w +
                   " = launch.nproc_per_node) replicates nothing; use FULL_SHARD, or more nodes");
  }
}

}  // namespace

Result<void> validate_for_world(const Experiment& exp, int world_size, int local_world_size) {
  detail::Locator loc(exp.source);
  detail::Diagnostics diag;
  detail::validate_fields(exp, loc, diag);
  if (world_size < 1 || local_world_size < 1 || local_world_size > world_size) {
    diag.add(loc.at("") + ": world size " + std::to_string(world_size) + ", local world size " +
             std::to_string(local_world_size) +
             ": need 1 <= local world size <= world size; check WORLD_SIZE and LOCAL_WORLD_SIZE "
             "(or launch.nnodes and launch.nproc_per_node)");
    return fail(diag.text());
  }
  if (exp.train.batch_size >= 1 && exp.train.micro_batch_size >= 0) {
    check_batch(exp.train, world_size, loc, diag);
  }
  if (exp.shard.strategy == ShardStrategy::hybrid_shard) {
    check_hybrid(world_size, local_world_size, loc, diag);
  }
  if (!diag.empty()) return fail(diag.text());
  return ok();
}

Result<void> validate_for_launch(const Experiment& exp) {
  if (exp.launch.nnodes < 1 || exp.launch.nproc_per_node < 1) {
    detail::Locator loc(exp.source);
    detail::Diagnostics diag;
    detail::validate_fields(exp, loc, diag);
    return fail(diag.text());
  }
  return validate_for_world(exp, launch_world_size(exp.launch), exp.launch.nproc_per_node);
}

int launch_world_size(const LaunchSection& launch) { return launch.nnodes * launch.nproc_per_node; }

std::int64_t micro_batch_size_for(const TrainSection& train, int world_size) {
  if (train.micro_batch_size > 0) return train.micro_batch_size;
  return world_size > 0 ? train.batch_size / world_size : 0;
}

std::int64_t grad_accumulation_steps(const TrainSection& train, int world_size) {
  const std::int64_t per_step = micro_batch_size_for(train, world_size) * world_size;
  return per_step > 0 ? train.batch_size / per_step : 0;
}

}  // namespace shardscope::spec
