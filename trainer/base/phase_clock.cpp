#include "trainer/base/phase_clock.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>

namespace shardscope::trainer {
namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Handles are normally waited in the step that issued them; a bound keeps a handle that is
// never waited (a failed rank's) from growing the map without end.
constexpr std::size_t kMaxInFlight = 4096;

}  // namespace

PhaseClock& PhaseClock::process() {
  static PhaseClock clock = [] {
    PhaseClock c;
    const char* env = std::getenv("SHARDSCOPE_PHASES");
    c.m_enabled = env == nullptr || std::string_view(env) != "0";
    return c;
  }();
  return clock;
}

bool PhaseClock::mine() const { return m_running && std::this_thread::get_id() == m_thread; }

void PhaseClock::close_current(double now) {
  m_times.seconds[static_cast<std::size_t>(m_current)] += now - m_since;
  m_since = now;
}

void PhaseClock::start_step() {
  if (!m_enabled) return;
  m_running = true;
  m_thread = std::this_thread::get_id();
  m_current = Phase::other;
  m_times = PhaseTimes{};
  m_spans.clear();
  m_start = m_since = steady_now();
}

PhaseTimes PhaseClock::end_step() {
  if (!mine()) return {};
  const double now = steady_now();
  close_current(now);
  m_times.wall = now - m_start;
  // comm_total: the union of the collectives' spans (overlapping collectives count once).
  std::sort(m_spans.begin(), m_spans.end());
  double covered_to = m_start;
  for (const auto& [from, to] : m_spans) {
    const double begin = std::max(from, covered_to);
    if (to > begin) {
      m_times.comm_total += to - begin;
      covered_to = to;
    }
  }
  m_spans.clear();
  m_running = false;
  return m_times;
}

Phase PhaseClock::enter(Phase phase) {
  if (!mine()) return phase;
  const Phase previous = m_current;
  if (phase != previous) {
    close_current(steady_now());
    m_current = phase;
  }
  return previous;
}

void PhaseClock::issued(const void* work) {
  if (work == nullptr || std::this_thread::get_id() != m_thread) return;
  if (m_issued.size() >= kMaxInFlight) m_issued.clear();
  m_issued[work] = steady_now();
}

void PhaseClock::waited(const void* work) {
  if (work == nullptr || !mine()) return;
  const auto it = m_issued.find(work);
  if (it == m_issued.end()) return;
  if (m_spans.size() < kMaxInFlight)
    m_spans.emplace_back(std::max(it->second, m_start), steady_now());
  m_issued.erase(it);
}

}  // namespace shardscope::trainer
