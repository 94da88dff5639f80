// The [launch] rules: the shape of the job, where it runs, its environment and the Slurm
// fields. Fields of another launcher kind must keep their defaults, so a typo'd kind never
// silently drops the hosts or the partition the user wrote.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <set>

#include "spec/experiment_schema.h"

namespace shardscope::spec::detail {

bool is_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

namespace {

struct Check {
  const Locator& loc;
  Diagnostics& diag;
  void operator()(bool ok, std::string_view field, const std::string& message) const {
    if (!ok) diag.field(loc, field, message);
  }
};

// Built by appending: GCC 12's -Wrestrict misfires on "\"" + std::string(s) at -O3.
std::string quoted(std::string_view s) {
  std::string out(1, '"');
  out.append(s);
  out.push_back('"');
  return out;
}

bool identifier(std::string_view s) { return is_identifier(s); }

bool has_space_or_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

// A word handed to ssh or sbatch: no blanks, no control characters, and no leading '-' that
// would turn it into an option.
bool safe_word(std::string_view s) { return !has_space_or_control(s) && s.rfind('-', 0) != 0; }

bool digits(std::string_view s, std::size_t min_len, std::size_t max_len) {
  return s.size() >= min_len && s.size() <= max_len &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Slurm's --time as this schema accepts it: "HH:MM:SS" (hours unbounded) or "D-HH:MM:SS"
// (hours < 24); minutes and seconds < 60; not all zero.
bool slurm_time_ok(std::string_view t) {
  std::string_view clock = t;
  bool days = false;
  if (const auto dash = t.find('-'); dash != std::string_view::npos) {
    if (!digits(t.substr(0, dash), 1, 4)) return false;
    clock = t.substr(dash + 1);
    days = true;
  }
  const auto c1 = clock.find(':');
  const auto c2 = clock.find(':', c1 == std::string_view::npos ? c1 : c1 + 1);
  if (c1 == std::string_view::npos || c2 == std::string_view::npos) return false;
  const auto hh = clock.substr(0, c1);
  const auto mm = clock.substr(c1 + 1, c2 - c1 - 1);
  const auto ss = clock.substr(c2 + 1);
  if (!digits(hh, 1, days ? 2 : 5) || !digits(mm, 2, 2) || !digits(ss, 2, 2)) return false;
  if (std::stoi(std::string(mm)) > 59 || std::stoi(std::string(ss)) > 59) return false;
  if (days && std::stoi(std::string(hh)) > 23) return false;
  return t.find_first_of("123456789") != std::string_view::npos;
}

void check_shape(const LaunchSection& l, const TrainSection& t, const Check& check) {
  check(l.nnodes >= 1 && l.nnodes <= 100000, "launch.nnodes",
        "must be in [1, 100000] (got " + std::to_string(l.nnodes) + "); use e.g. 1");
  check(l.nproc_per_node >= 1 && l.nproc_per_node <= 4096, "launch.nproc_per_node",
        "must be in [1, 4096] (got " + std::to_string(l.nproc_per_node) + "); use e.g. 2");
  check(l.threads_per_rank >= 1, "launch.threads_per_rank",
        "must be >= 1 (got " + std::to_string(l.threads_per_rank) + "); use e.g. 1");
  check(t.threads == 0 || t.threads == l.threads_per_rank, "train.threads",
        "is " + std::to_string(t.threads) + " but launch.threads_per_rank is " +
            std::to_string(l.threads_per_rank) +
            "; set only one (train.threads = 0 follows the launcher's OMP_NUM_THREADS)");
  check(l.grace_s >= 0, "launch.grace_s",
        "must be >= 0 seconds (got " + std::to_string(l.grace_s) + "); use e.g. 5");
  check(!l.trainer.empty() && !has_space_or_control(l.trainer), "launch.trainer",
        "must be an executable name or path without blanks (got " + quoted(l.trainer) +
            "); use e.g. \"shardtrain\"");
}

void check_gpus(const LaunchSection& l, const ShardSection& shard, const Check& check) {
  if (l.gpus.empty()) return;
  check(
      l.kind == LaunchKind::local, "launch.gpus",
      "is only used by launch.kind = \"local\"; for slurm use launch.slurm_gpus_per_node, for ssh "
      "set CUDA_VISIBLE_DEVICES on the hosts");
  std::set<int> seen;
  for (int g : l.gpus) {
    check(g >= 0, "launch.gpus", "has a negative GPU id (" + std::to_string(g) + ")");
    check(seen.insert(g).second, "launch.gpus",
          "lists GPU " + std::to_string(g) + " twice; each rank needs its own GPUs");
  }
  // Every local rank gets the same number of GPUs: gpus.size() / ranks. With Gloo collectives
  // (shard.backend = "gloo") ranks may also share GPUs, the same number of ranks on each.
  const long ranks = static_cast<long>(l.nnodes) * l.nproc_per_node;
  const auto n = static_cast<long>(l.gpus.size());
  if (shard.backend == "gloo" && n < ranks && ranks % n == 0) return;
  check(ranks > 0 && static_cast<long>(l.gpus.size()) % ranks == 0, "launch.gpus",
        "has " + std::to_string(l.gpus.size()) + " GPUs for " + std::to_string(ranks) +
            " ranks (launch.nnodes x launch.nproc_per_node)" +
            "; give a multiple of the rank count (each rank gets the same number), or with "
            "shard.backend = \"gloo\" a divisor of it (ranks share GPUs)");
}

void check_hosts(const LaunchSection& l, const Check& check) {
  if (l.kind != LaunchKind::ssh) {
    check(l.hosts.empty(), "launch.hosts",
          "is only used by launch.kind = \"ssh\"; remove it or set kind = \"ssh\"");
    return;
  }
  check(!l.hosts.empty(), "launch.hosts",
        "launch.kind = \"ssh\" needs at least one host; e.g. hosts = [\"gpu1\", \"gpu2\"]");
  check(l.hosts.empty() || static_cast<long>(l.hosts.size()) == l.nnodes, "launch.nnodes",
        "is " + std::to_string(l.nnodes) + " but launch.hosts lists " +
            std::to_string(l.hosts.size()) +
            " hosts; with kind = \"ssh\" each node is a host: "
            "set nnodes = " +
            std::to_string(l.hosts.size()));
  std::set<std::string> seen;
  for (const auto& h : l.hosts) {
    check(!h.empty() && safe_word(h), "launch.hosts",
          "entry " + quoted(h) + " is not a host name or ~/.ssh/config alias");
    check(seen.insert(h).second, "launch.hosts", "lists " + quoted(h) + " twice");
  }
}

void check_env(const LaunchSection& l, const Check& check) {
  // What the launcher itself sets: a user value would fight the rendezvous or the thread and
  // GPU settings, so the error points at the field that controls it.
  static const std::map<std::string, std::string> kOwned = {
      {"RANK", "the launcher"},
      {"WORLD_SIZE", "launch.nnodes x nproc_per_node"},
      {"LOCAL_RANK", "the launcher"},
      {"LOCAL_WORLD_SIZE", "launch.nproc_per_node"},
      {"MASTER_ADDR", "launch.hosts"},
      {"MASTER_PORT", "the launcher (a free port per run)"},
      {"OMP_NUM_THREADS", "launch.threads_per_rank"},
      {"CUDA_VISIBLE_DEVICES", "launch.gpus"},
      {"SHARDSCOPE_RDZV_TOKEN", "the launcher (a random token per run)"}};
  for (const auto& [key, value] : l.env) {
    const std::string field = "launch.env." + key;
    check(identifier(key), field,
          "is not a valid environment variable name; use letters, digits and '_', not starting "
          "with a digit");
    if (auto it = kOwned.find(key); it != kOwned.end()) {
      check(false, field, "is set by the launcher; use " + it->second + " instead");
    }
    check(value.find('\0') == std::string::npos, field, "contains a NUL character");
    auto refs = env_references(value);
    if (!refs) {
      check(false, field, refs.message());
    } else if (refs->empty() && env_name_looks_secret(key)) {
      check(false, field,
            "looks like a secret, and a literal value would be stored in the run log, trial.toml "
            "and the job script; write \"${" +
                key + "}\" to take it from the environment of the process that starts the run");
    } else if (env_value_looks_secret(value)) {
      check(false, field,
            "is a URL with a literal user or password (user:password@), which would be stored in "
            "the run log, trial.toml and the job script; write \"${" +
                key +
                "}\" to take the whole URL from the environment of the process that starts the "
                "run, or put references in its userinfo (\"https://${USER}:${PASS}@host\")");
    }
  }
}

void check_slurm_extra(const LaunchSection& l, const Check& check) {
  static const std::map<std::string, std::string> kOwned = {
      {"--nodes", "launch.nnodes"},
      {"-N", "launch.nnodes"},
      {"--ntasks-per-node", "launch.nproc_per_node"},
      {"--ntasks", "launch.nproc_per_node"},
      {"-n", "launch.nproc_per_node"},
      {"--gpus-per-node", "launch.slurm_gpus_per_node"},
      {"--partition", "launch.slurm_partition"},
      {"-p", "launch.slurm_partition"},
      {"--account", "launch.slurm_account"},
      {"-A", "launch.slurm_account"},
      {"--time", "launch.slurm_time"},
      {"-t", "launch.slurm_time"},
      {"--signal", "launch.grace_s"},
      {"--output", "the launcher (rank-N files)"},
      {"-o", "the launcher (rank-N files)"},
      {"--error", "the launcher (rank-N files)"},
      {"-e", "the launcher (rank-N files)"},
      {"--job-name", "experiment.name"},
      {"-J", "experiment.name"}};
  for (const auto& d : l.slurm_extra) {
    const std::string name = d.substr(0, d.find_first_of("= "));
    check(d.rfind('-', 0) == 0 && d.find('\n') == std::string::npos, "launch.slurm_extra",
          "entry " + quoted(d) +
              " must be one sbatch option without \"#SBATCH\", e.g. "
              "\"--exclusive\" or \"--constraint=a100\"");
    if (auto it = kOwned.find(name); it != kOwned.end()) {
      check(false, "launch.slurm_extra",
            "entry " + quoted(d) + " is generated from " + it->second + "; set that instead");
    }
  }
}

void check_slurm(const LaunchSection& l, const Check& check) {
  if (l.kind != LaunchKind::slurm) {
    const LaunchSection d;
    const std::pair<std::string_view, bool> fields[] = {
        {"launch.slurm_partition", l.slurm_partition == d.slurm_partition},
        {"launch.slurm_account", l.slurm_account == d.slurm_account},
        {"launch.slurm_time", l.slurm_time == d.slurm_time},
        {"launch.slurm_gpus_per_node", l.slurm_gpus_per_node == d.slurm_gpus_per_node},
        {"launch.slurm_extra", l.slurm_extra == d.slurm_extra},
        {"launch.slurm_host", l.slurm_host == d.slurm_host}};
    for (const auto& [field, is_default] : fields) {
      check(is_default, field,
            "is only used by launch.kind = \"slurm\"; remove it or set kind = \"slurm\"");
    }
    return;
  }
  check(l.slurm_time.empty() || slurm_time_ok(l.slurm_time), "launch.slurm_time",
        "is " + quoted(l.slurm_time) + "; use \"HH:MM:SS\" or \"D-HH:MM:SS\", e.g. \"04:00:00\"");
  check(l.slurm_gpus_per_node >= 0, "launch.slurm_gpus_per_node",
        "must be >= 0 (got " + std::to_string(l.slurm_gpus_per_node) + ")");
  check(l.slurm_partition.empty() || safe_word(l.slurm_partition), "launch.slurm_partition",
        "is not a partition name: " + quoted(l.slurm_partition));
  check(l.slurm_account.empty() || safe_word(l.slurm_account), "launch.slurm_account",
        "is not an account name: " + quoted(l.slurm_account));
  check(l.slurm_host.empty() || safe_word(l.slurm_host), "launch.slurm_host",
        "is not a host name or ~/.ssh/config alias: " + quoted(l.slurm_host));
  check_slurm_extra(l, check);
}

}  // namespace

void validate_launch(const Experiment& exp, const Locator& loc, Diagnostics& diag) {
  const Check check{loc, diag};
  const LaunchSection& l = exp.launch;
  check_shape(l, exp.train, check);
  check_gpus(l, exp.shard, check);
  check_hosts(l, check);
  check_env(l, check);
  check_slurm(l, check);
  check(
      std::isfinite(l.device_memory_gib) && l.device_memory_gib >= 0 && l.device_memory_gib <= 1e6,
      "launch.device_memory_gib",
      "must be a number of GiB between 0 (detect) and 1e6 (got " +
          std::to_string(l.device_memory_gib) + ")");
  check(l.kind != LaunchKind::local || l.remote_dir.empty(), "launch.remote_dir",
        "is only used by launch.kind = \"ssh\" or \"slurm\"; remove it");
  const bool control = std::any_of(l.remote_dir.begin(), l.remote_dir.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  check(!control && l.remote_dir.rfind('-', 0) != 0, "launch.remote_dir",
        "must be a path (no control characters, no leading '-'): " + quoted(l.remote_dir));
}

}  // namespace shardscope::spec::detail

namespace shardscope::spec {

Result<std::vector<std::string>> env_references(const std::string& value) {
  std::vector<std::string> names;
  for (std::size_t at = value.find("${"); at != std::string::npos; at = value.find("${", at + 1)) {
    const auto close = value.find('}', at + 2);
    if (close == std::string::npos) {
      return fail(
          "has \"${\" without a closing \"}\"; write \"${NAME}\" to use the variable "
          "NAME of the launching environment");
    }
    std::string name = value.substr(at + 2, close - at - 2);
    if (!detail::is_identifier(name)) {
      return fail("refers to \"${" + name + "}\", which is no environment variable name");
    }
    names.push_back(std::move(name));
    at = close;
  }
  return names;
}

bool env_name_looks_secret(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  static const char* const kMarks[] = {"TOKEN",      "SECRET", "PASSWORD",   "PASSWD",
                                       "API_KEY",    "APIKEY", "ACCESS_KEY", "PRIVATE_KEY",
                                       "CREDENTIAL", "AUTH"};
  const std::string key_suffix = "_KEY";
  const bool ends_in_key =
      upper.size() > key_suffix.size() &&
      upper.compare(upper.size() - key_suffix.size(), key_suffix.size(), key_suffix) == 0;
  return ends_in_key || std::any_of(std::begin(kMarks), std::end(kMarks), [&](const char* mark) {
           return upper.find(mark) != std::string::npos;
         });
}

bool env_value_looks_secret(const std::string& value) {
  for (std::size_t scheme = value.find("://"); scheme != std::string::npos;
       scheme = value.find("://", scheme + 3)) {
    const std::size_t from = scheme + 3;
    const std::size_t end = value.find_first_of("/?#", from);
    const std::string authority =
        value.substr(from, end == std::string::npos ? std::string::npos : end - from);
    const std::size_t at = authority.rfind('@');
    if (at == std::string::npos) continue;
    std::string userinfo = authority.substr(0, at);
    // "${NAME}" references are taken from the environment at launch: not literal.
    for (std::size_t open = userinfo.find("${"); open != std::string::npos;
         open = userinfo.find("${")) {
      const std::size_t close = userinfo.find('}', open);
      if (close == std::string::npos) break;
      userinfo.erase(open, close - open + 1);
    }
    if (userinfo.find_first_not_of(':') != std::string::npos) return true;
  }
  return false;
}

Result<std::map<std::string, std::string>> resolve_launch_env(
    const LaunchSection& launch,
    const std::function<std::optional<std::string>(const std::string&)>& lookup) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : launch.env) {
    const std::string field = "launch.env." + key;
    auto refs = env_references(value);
    if (!refs) return fail(field + ": " + refs.message());
    std::string resolved;
    std::size_t from = 0;
    for (const auto& name : *refs) {
      const auto at = value.find("${" + name + "}", from);
      auto got = lookup(name);
      if (!got) {
        std::string message = field;
        message.append(": refers to ${").append(name);
        message.append("}, which is not set in the environment that starts the run; export ");
        message.append(name).append(" there first");
        return fail(message);
      }
      resolved.append(value, from, at - from).append(*got);
      from = at + name.size() + 3;
    }
    resolved.append(value, from, std::string::npos);
    out[key] = std::move(resolved);
  }
  return out;
}

}  // namespace shardscope::spec
