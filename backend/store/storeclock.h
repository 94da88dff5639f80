// The clocks the run log reads to judge whether a lease holder is alive. Two machines' wall
// clocks are never compared, and a jump of this machine's wall clock (NTP, a suspended laptop, a
// user's `date -s`) never makes a live holder look dead:
// - PostgreSQL: heartbeats are written, and their age measured, with the server's clock.
// - SQLite, a holder on this machine and this boot: the age is measured on the monotonic clock
//   (CLOCK_BOOTTIME, which counts suspended time and never jumps); a holder of an earlier boot is
//   dead (its processes are gone).
// - SQLite, a holder on another machine (a run log on a shared file system): the wall clock is
//   the only clock both have; only there does its offset matter.
// Tests replace the clock through RunStore::Options::clock (a forward jump, a reboot).
#pragma once

#include <QString>

#include <optional>

namespace shardscope::backend {

class StoreClock {
 public:
  virtual ~StoreClock() = default;
  /// Unix seconds (the wall clock).
  virtual double wallNow() const;
  /// Seconds on CLOCK_BOOTTIME: meaningful only against another reading of the same boot.
  virtual double monotonicNow() const;
  /// /proc/sys/kernel/random/boot_id: changes with every boot; empty when unknown.
  virtual QString bootId() const;
  /// The machine's own clock.
  static const StoreClock& system();
};

/// How old a heartbeat is, by the rules above: `serverAgeS` when the server measured it
/// (PostgreSQL), else on the monotonic clock when the beat is of this boot (`bootId`) and its
/// monotonic reading `beatMono` is known, else on the wall clock (`heartbeat`, unix seconds).
double heartbeatAge(const StoreClock& clock, std::optional<double> serverAgeS,
                    const QString& bootId, std::optional<double> beatMono, double heartbeat);

}  // namespace shardscope::backend
