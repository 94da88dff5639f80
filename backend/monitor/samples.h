// A run's probe answers: its `sample` events (rank 0; eval.probes, docs/trainer.md), read back
// from the run log, where they are stored like every other event (the events table, on SQLite
// and PostgreSQL alike), or from a run directory's events-rank-0.jsonl, so a run started outside
// Shardscope can be asked too.
#pragma once

#include <QJsonObject>
#include <QString>

#include <optional>
#include <vector>

#include "backend/store/runreader.h"
#include "spec/events.h"
#include "spec/result.h"

namespace shardscope::backend {

/// The run's `sample` events of its latest attempt, in the order rank 0 wrote them; with `step`,
/// only those of that step.
[[nodiscard]] Result<std::vector<spec::SampleEvent>> samplesOfRun(
    RunReader& reader, qint64 runId, std::optional<qint64> step = std::nullopt);

/// The same from `runDir`/events-rank-0.jsonl; a line that does not parse is an error naming it.
[[nodiscard]] Result<std::vector<spec::SampleEvent>> samplesOfRunDir(
    const QString& runDir, std::optional<qint64> step = std::nullopt);

/// One sample as JSON: the event's fields (scores only when it has a reference).
QJsonObject sampleToJson(const spec::SampleEvent& sample);

}  // namespace shardscope::backend
