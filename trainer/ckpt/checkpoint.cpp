#include "trainer/ckpt/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "spec/remove_tree.h"
#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"

namespace shardscope::ckpt {
namespace fs = std::filesystem;
namespace {

using spec::ErrorKind;

std::string step_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

// The step of a "step-NNNNNN" folder name, or -1. Names are compared by this number: from step
// 1,000,000 on they have seven digits and sort before "step-999999" as text.
std::int64_t step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return -1;
  std::int64_t step = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// The step-NNNNNN folders under `root`, oldest first.
std::vector<std::pair<std::int64_t, fs::path>> step_dirs(const fs::path& root) {
  std::vector<std::pair<std::int64_t, fs::path>> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const auto step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_directory(ec)) dirs.emplace_back(step, e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Why `dir` is not a complete checkpoint ("" when it is): meta.json parses, and every shard's
// rank file is there.
std::string incomplete_reason(const fs::path& dir) {
  std::ifstream in(dir / "meta.json");
  if (!in.good()) return "no meta.json";
  const auto meta = nlohmann::json::parse(in, nullptr, false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("shard_size") ||
      !meta["shard_size"].is_number_integer() || !meta.contains("flats"))
    return "meta.json is not a complete checkpoint description";
  const auto shards = meta["shard_size"].get<std::int64_t>();
  for (std::int64_t s = 0; s < shards; ++s) {
    const auto file = dir / ("rank-" + std::to_string(s) + ".safetensors");
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return file.filename().string() + " is missing";
  }
  return {};
}

// Flushes a folder to disk (a rename or a new entry in it), so a completed checkpoint survives a
// crash of the machine. EINVAL: a file system that cannot sync folders has nothing to flush.
void sync_dir(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    if (::fsync(fd) != 0) err = errno;
    ::close(fd);
  }
  SHARD_CHECK(err == 0 || err == EINVAL, trainer::write_error_kind(err),
              "cannot sync folder " + path.string() + ": " + std::strerror(err),
              "check the run directory's disk");
}

// Writes `text` to `path` and syncs it, every result checked: a full disk (ENOSPC, or EFBIG past
// the file size limit) raises disk_full naming the file and the bytes, and leaves no file behind.
void write_synced(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SHARD_CHECK(fd >= 0, trainer::write_error_kind(errno),
              "cannot create " + path.string() + ": " + std::strerror(errno),
              "check the run directory is writable and has space");
  std::size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;  // write() of 0 bytes into a regular file: no room
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;  // tmpfs and NFS report ENOSPC here
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) ::unlink(path.c_str());
  SHARD_CHECK(err == 0, trainer::write_error_kind(err),
              "writing " + path.string() + " failed after " + std::to_string(done) + " of " +
                  std::to_string(text.size()) + " bytes: " + std::strerror(err),
              "free space on the run directory's disk (the older checkpoints are kept), then "
              "resume with --resume auto");
}

// Every rank learns whether every rank did its part of a checkpoint phase: the rank whose part
// failed raises its own error; the others raise the same kind naming it. Rank 0 first removes the
// .tmp folder (every rank's writes are over), so a failed checkpoint leaves nothing behind and
// every older checkpoint stays. Without this a failing rank would leave its peers in the next
// barrier until they reported peer_lost, hiding the cause.
void agree(dist::ProcessGroup& world, const std::optional<trainer::TrainerError>& failure,
           const fs::path& tmp, const std::string& name) {
  auto flag = at::zeros({2}, at::kFloat);
  if (failure) {
    flag[0] = static_cast<float>(world.rank() + 1);
    flag[1] = failure->kind() == ErrorKind::disk_full ? 1.0F : 0.0F;
  }
  world.all_reduce_max(flag);
  const int failed = static_cast<int>(flag[0].item<float>()) - 1;
  if (failed < 0) return;
  if (world.rank() == 0) spec::remove_tree(tmp.string());
  if (failure) throw *failure;
  const auto kind = flag[1].item<float>() > 0 ? ErrorKind::disk_full : ErrorKind::io;
  SHARD_FAIL(kind,
             "checkpoint " + name + " not written: rank " + std::to_string(failed) +
                 " could not write its part (" + std::string(spec::to_string(kind)) +
                 ", see rank-" + std::to_string(failed) + ".log); the older checkpoints are kept",
             kind == ErrorKind::disk_full
                 ? "free space on the run directory's disk, then resume with --resume auto"
                 : "read rank-" + std::to_string(failed) + ".log for the file and the cause");
}

// This rank's shard index: its rank inside the shard group.
int shard_index(const shard::ShardEngine& engine) { return engine.groups().shard->rank(); }

nlohmann::json layout_json(shard::ShardEngine& engine) {
  nlohmann::json flats = nlohmann::json::array();
  for (const auto& unit : engine.units()) {
    for (const auto& flat : unit.flats) {
      flats.push_back({{"name", flat.name},
                       {"numel", flat.numel},
                       {"padded", flat.padded},
                       {"shard_numel", flat.shard_numel},
                       {"trainable", flat.trainable}});
    }
  }
  return flats;
}

void prune(const fs::path& root, std::int64_t keep) {
  if (keep <= 0) return;
  const auto dirs = step_dirs(root);  // oldest first, by step number
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < dirs.size(); ++i) {
    spec::remove_tree(dirs[i].second.string());  // best effort: the newest are complete
  }
}

}  // namespace

std::string save_checkpoint(const std::string& run_dir, shard::ShardEngine& engine,
                            optim::ShardedAdamW& optimizer, const TrainPosition& position,
                            const std::string& config_hash, dist::ProcessGroup& world,
                            std::int64_t keep) {
  // Absolute, so an error names the file wherever the run directory was given from ("--run-dir .").
  const fs::path root = fs::absolute(fs::path(run_dir) / "ckpt").lexically_normal();
  const std::string name = step_name(position.step);
  const fs::path tmp = root / ("." + name + ".tmp");
  std::optional<trainer::TrainerError> failure;
  const auto attempt = [&](const std::function<void()>& part) {
    try {
      part();
    } catch (const trainer::TrainerError& e) {
      failure = e;
    }
  };
  if (world.rank() == 0) {
    attempt([&] {
      std::error_code ec;
      spec::remove_tree(tmp.string());
      fs::create_directories(tmp, ec);
      SHARD_CHECK(!ec, trainer::write_error_kind(ec.value()),
                  "cannot create " + tmp.string() + ": " + ec.message(),
                  "check the run directory is writable and has space");
    });
  }
  agree(world, failure, tmp, name);
  NamedTensors tensors;
  auto& params = optimizer.params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    tensors.emplace_back(params[i]->name + ".exp_avg", optimizer.exp_avg()[i]);
    tensors.emplace_back(params[i]->name + ".exp_avg_sq", optimizer.exp_avg_sq()[i]);
  }
  for (const auto& unit : engine.units())
    for (const auto& flat : unit.flats) tensors.emplace_back(flat.name + ".master", flat.master);
  attempt([&] {
    write_safetensors((tmp / ("rank-" + std::to_string(world.rank()) + ".safetensors")).string(),
                      tensors,
                      {{"rank", std::to_string(world.rank())},
                       {"shard_index", std::to_string(shard_index(engine))}});
  });
  agree(world, failure, tmp, name);
  std::string rel = "ckpt/" + name;
  if (world.rank() == 0) {
    attempt([&] {
      nlohmann::json meta{{"format", "shardscope-sharded-v1"},
                          {"step", position.step},
                          {"data_offset", position.data_offset},
                          {"grad_scale", position.grad_scale},
                          {"grad_scale_good_steps", position.good_steps},
                          {"optimizer_steps", optimizer.steps()},
                          {"world_size", world.size()},
                          {"shard_size", engine.groups().shard->size()},
                          {"config_hash", config_hash},
                          {"flats", layout_json(engine)}};
      write_synced(tmp / "meta.json", meta.dump(1) + "\n");
      sync_dir(tmp);
      std::error_code ec;
      spec::remove_tree((root / name).string());
      fs::rename(tmp, root / name, ec);
      SHARD_CHECK(!ec, trainer::write_error_kind(ec.value()),
                  "cannot complete checkpoint " + rel + ": " + ec.message(), "");
      sync_dir(root);  // the rename itself
    });
  }
  agree(world, failure, tmp, name);
  // Only now, with the new checkpoint complete and synced, may older ones go.
  if (world.rank() == 0) prune(root, keep);
  return rel;
}

std::string find_latest_checkpoint(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "ckpt";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  // The newest complete one: a checkpoint damaged after it was completed (a lost rank file, a
  // truncated meta.json) is passed over, with a warning, for the one before it.
  const auto dirs = step_dirs(root);
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const auto why = incomplete_reason(it->second);
    if (why.empty()) return it->second.string();
    trainer::events().write(spec::LogEvent{"warn", "--resume auto: " + it->second.string() +
                                                       " is not usable (" + why +
                                                       "); trying the checkpoint before it"});
  }
  return {};
}

TrainPosition load_checkpoint(const std::string& dir, shard::ShardEngine& engine,
                              optim::ShardedAdamW& optimizer) {
  std::ifstream in(fs::path(dir) / "meta.json");
  SHARD_CHECK(in.good(), ErrorKind::io, dir + "/meta.json: cannot read",
              "give --resume a complete ckpt/step-NNNNNN directory, or --resume auto");
  auto meta = nlohmann::json::parse(in, nullptr, false);
  SHARD_CHECK(!meta.is_discarded(), ErrorKind::data, dir + "/meta.json: not valid JSON",
              "the checkpoint is damaged; resume from an older one");
  std::map<std::string, nlohmann::json> old_flats;
  for (const auto& f : meta.at("flats")) old_flats[f.at("name").get<std::string>()] = f;
  const int old_shards = meta.at("shard_size").get<int>();
  // Shard s of the old layout lives in the file of a rank whose shard index is s: ranks
  // 0..shard_size-1 (the first node for HYBRID_SHARD, rank 0 alone for NO_SHARD).
  std::map<int, SafetensorsFile> files;
  auto file_of = [&](int s) -> const SafetensorsFile& {
    auto it = files.find(s);
    if (it == files.end())
      it = files.emplace(s, read_safetensors(dir + "/rank-" + std::to_string(s) + ".safetensors"))
               .first;
    return it->second;
  };
  auto copy_range = [&](const shard::FlatParam& flat, const std::string& suffix,
                        const at::Tensor& dst) {
    const auto& old = old_flats.at(flat.name);
    const auto old_n = old.at("shard_numel").get<std::int64_t>();
    dst.zero_();
    const auto begin = flat.shard_offset;
    const auto end = std::min(flat.shard_offset + flat.shard_numel, flat.numel);
    for (int s = 0; s < old_shards; ++s) {
      const auto lo = std::max(begin, s * old_n);
      const auto hi = std::min(end, (s + 1) * old_n);
      if (lo >= hi) continue;
      const std::string tensor = flat.name + suffix;
      const auto* src = file_of(s).find(tensor);
      std::string where = dir;
      where.append(": rank-")
          .append(std::to_string(s))
          .append(".safetensors lacks ")
          .append(tensor);
      SHARD_CHECK(src != nullptr, ErrorKind::data, where,
                  "the checkpoint is incomplete; resume from an older one");
      dst.narrow(0, lo - begin, hi - lo).copy_(src->narrow(0, lo - s * old_n, hi - lo));
    }
  };
  at::NoGradGuard no_grad;
  for (auto& unit : engine.units()) {
    for (auto& flat : unit.flats) {
      auto it = old_flats.find(flat.name);
      SHARD_CHECK(
          it != old_flats.end() && it->second.at("numel").get<std::int64_t>() == flat.numel,
          ErrorKind::config,
          dir + ": no flat parameter " + flat.name + " with " + std::to_string(flat.numel) +
              " elements in this checkpoint",
          "resume with the same [model] and shard.wrap_policy the checkpoint was made with");
      copy_range(flat, ".master", flat.master.detach());
    }
  }
  auto& params = optimizer.params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    copy_range(*params[i], ".exp_avg", optimizer.exp_avg()[i]);
    copy_range(*params[i], ".exp_avg_sq", optimizer.exp_avg_sq()[i]);
  }
  optimizer.set_steps(meta.at("optimizer_steps").get<std::int64_t>());
  return {meta.at("step").get<std::int64_t>(), meta.at("data_offset").get<std::int64_t>(),
          meta.at("grad_scale").get<double>(), meta.value("grad_scale_good_steps", 0)};
}

}  // namespace shardscope::ckpt
