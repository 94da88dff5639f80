#include "backend/store/storeclock.h"

#include <QFile>

#include <ctime>

#include "spec/events.h"

namespace shardscope::backend {

double StoreClock::wallNow() const { return spec::unix_time_now(); }

double StoreClock::monotonicNow() const {
  timespec now{};
  ::clock_gettime(CLOCK_BOOTTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

QString StoreClock::bootId() const {
  static const QString id = [] {
    QFile file(QStringLiteral("/proc/sys/kernel/random/boot_id"));
    if (!file.open(QIODevice::ReadOnly)) return QString();
    return QString::fromLatin1(file.readAll()).trimmed();
  }();
  return id;
}

const StoreClock& StoreClock::system() {
  static const StoreClock clock;
  return clock;
}

double heartbeatAge(const StoreClock& clock, std::optional<double> serverAgeS,
                    const QString& bootId, std::optional<double> beatMono, double heartbeat) {
  if (serverAgeS) return *serverAgeS;
  if (beatMono && !bootId.isEmpty() && bootId == clock.bootId()) {
    return clock.monotonicNow() - *beatMono;
  }
  return clock.wallNow() - heartbeat;
}

}  // namespace shardscope::backend
