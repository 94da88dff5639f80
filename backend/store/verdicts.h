// Human verdicts (schema v11): a person's mark, good or bad, on one probe's answer (eval.probes)
// at one step of one run, with who marked it and when. RunStore writes them (setVerdict), RunReader
// reads them; a run's counts give its good rate (good / marked), which a search can take as an
// objective (search.objectives = {"probes.good_rate" = "maximize"}, spec::kGoodRateObjective,
// docs/config.md): a finished trial's value there is its good rate as the verdicts stand, written
// again with every mark on it (null while nothing is marked).
#pragma once

#include <QString>

#include <optional>

#include "spec/result.h"

namespace shardscope::backend {

/// A mark on one answer.
enum class Verdict { good, bad };

/// "good" or "bad", as stored and printed.
const char* verdictName(Verdict verdict);
/// Parses "good", "bad" (and "clear": nullopt, no mark); the error names the word and the choices.
[[nodiscard]] Result<std::optional<Verdict>> parseVerdict(const QString& word);
/// Who marks from this process: $USER (or $USERNAME), else "unknown".
QString verdictAuthor();

/// One stored mark.
struct VerdictRecord {
  qint64 runId = 0;
  QString probe;  ///< the probe's id (its `sample` events' probe)
  qint64 step = 0;
  Verdict verdict = Verdict::good;
  QString who;
  double markedAt = 0;  ///< unix seconds
};

/// A run's marks counted.
struct VerdictCounts {
  qint64 good = 0;
  qint64 bad = 0;
  qint64 marked() const { return good + bad; }
  /// good / marked; nullopt while nothing is marked (a trial with no verdicts has no value).
  std::optional<double> goodRate() const {
    if (marked() == 0) return std::nullopt;
    return double(good) / double(marked());
  }
};

}  // namespace shardscope::backend
