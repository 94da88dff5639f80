#include "trainer/shard/trace.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

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

int Trace::collective(std::string_view op, std::string_view stage, const std::string& unit,
                      std::string_view phase, std::int64_t bytes, int inflight, bool prefetch,
                      std::string_view reason) {
  if (!m_file) return -1;
  nlohmann::json j{{"t", spec::unix_time_now()},
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
  line(j.dump());
  return m_defer ? static_cast<int>(m_lines.size()) - 1 : -1;
}

void Trace::gpu_span(std::string_view op, const std::string& unit, std::string_view phase,
                     double start_ms, double end_ms) {
  if (!m_file) return;
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
  for (std::size_t i = 0; i < m_lines.size(); ++i) {
    auto text = m_lines[i];
    text.insert(text.size() - 1, m_keys[i]);  // before the closing brace
    std::fputs(text.c_str(), m_file);
    std::fputc('\n', m_file);
  }
  m_lines.clear();
  m_keys.clear();
}

void Trace::placement(const std::string& flat, std::string_view what, std::string_view device,
                      std::string_view dtype, std::int64_t bytes, bool offloaded) {
  if (!m_file) return;
  nlohmann::json j{{"op", "placement"},     {"flat", flat},   {"what", what},
                   {"device", device},      {"dtype", dtype}, {"bytes", bytes},
                   {"offloaded", offloaded}};
  line(j.dump());
}

void Trace::load(const std::string& flat, std::int64_t read, std::int64_t shard) {
  if (!m_file) return;
  nlohmann::json j{{"op", "load"}, {"flat", flat}, {"read", read}, {"shard", shard}};
  line(j.dump());
}

void Trace::loaded(std::int64_t allocated, std::int64_t peak, std::int64_t rss) {
  if (!m_file) return;
  nlohmann::json j{{"op", "loaded"}, {"allocated", allocated}, {"peak", peak}, {"rss", rss}};
  line(j.dump());
}

void Trace::line(const std::string& json) {
  if (m_defer) {
    m_lines.push_back(json);
    m_keys.emplace_back();
    return;
  }
  std::fputs(json.c_str(), m_file);
  std::fputc('\n', m_file);
}

}  // namespace shardscope::shard
