#include "trainer/shard/trace.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "trainer/base/fatal.h"

namespace shardscope::shard {

Trace::~Trace() {
  if (!m_file) return;
  flush();
  std::fclose(m_file);
}

void Trace::open(const std::string& path, int rank) {
  const std::string file = rank == 0 ? path : path + ".rank-" + std::to_string(rank);
  m_file = std::fopen(file.c_str(), "w");
  SHARD_CHECK(m_file != nullptr, spec::ErrorKind::io,
              "--trace: cannot write " + file + ": " + std::strerror(errno),
              "give a path in a writable folder");
}

void Trace::open_sampled(const std::string& file, std::int64_t every_n_steps,
                         std::int64_t max_bytes) {
  std::error_code ec;
  const auto folder = std::filesystem::path(file).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  m_file = std::fopen(file.c_str(), "w");
  SHARD_CHECK(m_file != nullptr, spec::ErrorKind::io,
              "trace.every_n_steps: cannot write " + file + ": " + std::strerror(errno),
              "give the run a writable run directory, or set trace.every_n_steps = 0");
  m_every = every_n_steps;
  m_max_bytes = max_bytes;
}

void Trace::set_position(std::int64_t step, int micro) {
  m_step = step;
  m_micro = micro;
  m_on = !m_full && (m_every <= 0 || step % m_every == 0);
  if (m_on && micro == 0) m_origin = std::chrono::steady_clock::now();
}

void Trace::end_step() {
  if (m_every > 0) m_on = false;
}

int Trace::collective(std::string_view op, std::string_view stage, const std::string& unit,
                      std::string_view phase, std::int64_t bytes, int inflight, bool prefetch,
                      std::string_view reason, double wait_ms) {
  if (!recording()) return -1;
  const double now = now_ms();
  nlohmann::json j{{"t", spec::unix_time_now()},
                   {"ms", wait_ms >= 0 ? wait_ms : now},
                   {"step", m_step},
                   {"micro", m_micro},
                   {"op", op},
                   {"stage", stage},
                   {"unit", unit},
                   {"phase", phase},
                   {"bytes", bytes},
                   {"inflight", inflight},
                   {"prefetch", prefetch}};
  if (!reason.empty()) j["reason"] = reason;
  if (wait_ms >= 0) j["done_ms"] = now;
  if (!line(j.dump())) return -1;
  return m_defer ? static_cast<int>(m_lines.size()) - 1 : -1;
}

void Trace::compute(const std::string& unit, std::string_view phase, double start_ms,
                    double end_ms) {
  if (!recording()) return;
  // The fields every collective record has, so readers that group records by them read these too.
  nlohmann::json j{{"t", spec::unix_time_now()},
                   {"ms", start_ms},
                   {"end_ms", end_ms},
                   {"step", m_step},
                   {"micro", m_micro},
                   {"op", "compute"},
                   {"stage", "done"},
                   {"unit", unit},
                   {"phase", phase},
                   {"bytes", 0},
                   {"inflight", 0},
                   {"prefetch", false}};
  line(j.dump());
}

void Trace::gpu_span(std::string_view op, const std::string& unit, std::string_view phase,
                     double start_ms, double end_ms) {
  if (!recording()) return;
  for (const auto& [stage, ms] : {std::pair{"start", start_ms}, std::pair{"end", end_ms}}) {
    nlohmann::json j{{"step", m_step}, {"micro", m_micro}, {"op", op},    {"stage", stage},
                     {"unit", unit},   {"phase", phase},   {"gpu_ms", ms}};
    line(j.dump());
  }
}

void Trace::set(int record, const char* key, double value) {
  if (record < 0 || static_cast<std::size_t>(record) >= m_lines.size()) return;
  auto& fields = m_keys[static_cast<std::size_t>(record)];
  fields += ",\"";
  fields += key;
  fields += "\":";
  fields += nlohmann::json(value).dump();
}

void Trace::flush() {
  if (!m_file) return;
  for (std::size_t i = 0; i < m_lines.size(); ++i) {
    auto text = m_lines[i];
    text.insert(text.size() - 1, m_keys[i]);  // before the closing brace
    std::fputs(text.c_str(), m_file);
    std::fputc('\n', m_file);
  }
  m_lines.clear();
  m_keys.clear();
  if (m_full && !m_stop_written) {
    // Written past the bound on purpose: a reader learns why the records end here.
    m_stop_written = true;
    const nlohmann::json j{{"op", "stopped"}, {"reason", "max_mib"}, {"bytes", m_bytes}};
    std::fputs((j.dump() + "\n").c_str(), m_file);
    std::fflush(m_file);
  }
}

void Trace::placement(const std::string& flat, std::string_view what, std::string_view device,
                      std::string_view dtype, std::int64_t bytes, bool offloaded) {
  if (!recording()) return;
  nlohmann::json j{{"op", "placement"},     {"flat", flat},   {"what", what},
                   {"device", device},      {"dtype", dtype}, {"bytes", bytes},
                   {"offloaded", offloaded}};
  line(j.dump());
}

void Trace::load(const std::string& flat, std::int64_t read, std::int64_t shard) {
  if (!recording()) return;
  nlohmann::json j{{"op", "load"}, {"flat", flat}, {"read", read}, {"shard", shard}};
  line(j.dump());
}

void Trace::loaded(std::int64_t allocated, std::int64_t peak, std::int64_t rss) {
  if (!recording()) return;
  nlohmann::json j{{"op", "loaded"}, {"allocated", allocated}, {"peak", peak}, {"rss", rss}};
  line(j.dump());
}

bool Trace::line(const std::string& json) {
  if (m_full) return false;
  const auto size = static_cast<std::int64_t>(json.size()) + 1;
  if (m_max_bytes > 0 && m_bytes + size > m_max_bytes) {
    m_full = true;
    if (!m_defer) flush();  // the closing record (deferred: once the micro-step's lines are out)
    return false;
  }
  m_bytes += size;
  if (m_defer) {
    m_lines.push_back(json);
    m_keys.emplace_back();
    return true;
  }
  std::fputs(json.c_str(), m_file);
  std::fputc('\n', m_file);
  return true;
}

}  // namespace shardscope::shard
