#include "trainer/shard/trace.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "trainer/base/fatal.h"

namespace shardscope::shard {

Trace::~Trace() {
  if (m_file) std::fclose(m_file);
}

void Trace::open(const std::string& path, int rank) {
  const std::string file = rank == 0 ? path : path + ".rank-" + std::to_string(rank);
  m_file = std::fopen(file.c_str(), "w");
  SHARD_CHECK(m_file != nullptr, spec::ErrorKind::io,
              "--trace: cannot write " + file + ": " + std::strerror(errno),
              "give a path in a writable folder");
}

void Trace::collective(std::string_view op, std::string_view stage, const std::string& unit,
                       std::string_view phase, std::int64_t bytes, int inflight, bool prefetch,
                       std::string_view reason) {
  if (!m_file) return;
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

void Trace::line(const std::string& json) {
  std::fputs(json.c_str(), m_file);
  std::fputc('\n', m_file);
}

}  // namespace shardscope::shard
