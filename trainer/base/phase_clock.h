// Where a rank's time goes in an optimizer step (the `phases` event, docs/trainer.md). One clock
// per process, moved from phase to phase by the thread that trains: every instant between
// start_step() and end_step() belongs to exactly one phase, so the phases add up to the step's
// wall time by construction. A wait inside a phase (a collective inside the forward) is moved
// out of it by a nested PhaseScope and restored after. Calls from any other thread (Gloo's
// workers, the heartbeat, the watchdog) change nothing.
//
// The steady clock measures what the host does, which is the step's time on the CPU. On CUDA the
// host only queues kernels, so the trainer does not write these figures there (docs/trainer.md).
#pragma once

#include <array>
#include <cstddef>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shardscope::trainer {

enum class Phase : int { other, data, forward, backward, optimizer, comm, copy };
inline constexpr std::size_t kPhaseCount = 7;

/// One step's seconds on this rank.
struct PhaseTimes {
  std::array<double, kPhaseCount> seconds{};  // indexed by Phase
  double comm_total = 0;  // while any collective was in flight (issue to the end of its wait)
  double wall = 0;        // start_step() to end_step()

  double operator[](Phase p) const { return seconds[static_cast<std::size_t>(p)]; }
};

class PhaseClock {
 public:
  /// The process's clock. SHARDSCOPE_PHASES=0 in the environment turns it off (no `phases`
  /// events): the peer run of bench/trainer/bench_phases.py, which measures what it costs.
  static PhaseClock& process();
  bool enabled() const { return m_enabled; }

  /// Starts a step on the calling thread (the training thread), in Phase::other.
  void start_step();
  /// Ends the step and returns its times; the clock then ignores every call until the next
  /// start_step().
  PhaseTimes end_step();
  /// Moves the training thread to `phase`; returns the phase it left.
  Phase enter(Phase phase);

  /// A collective was issued (`work`: its handle, only compared); waited() adds the span from
  /// then to now to the step's comm_total (their union: overlapping collectives count once).
  /// Handles issued outside a step and waited in one count from the step's start.
  void issued(const void* work);
  void waited(const void* work);

 private:
  bool mine() const;
  void close_current(double now);

  bool m_enabled = true;
  bool m_running = false;
  std::thread::id m_thread;
  Phase m_current = Phase::other;
  double m_since = 0;  // when m_current began (steady seconds)
  double m_start = 0;  // when the step began
  PhaseTimes m_times;
  std::unordered_map<const void*, double> m_issued;  // work -> issue time
  std::vector<std::pair<double, double>> m_spans;    // this step's waited collectives
};

/// Enters a phase for a scope and returns to the one before at its end.
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase) : m_previous(PhaseClock::process().enter(phase)) {}
  ~PhaseScope() { PhaseClock::process().enter(m_previous); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase m_previous;
};

}  // namespace shardscope::trainer
