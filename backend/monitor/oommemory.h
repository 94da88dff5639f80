// What a rank's allocator saw when it ran out of memory: the `memory` of its `error` event of
// kind oom (spec/events.h OomMemory: the counting allocator's figures on the CPU, the caching
// allocator's on CUDA, with the history snapshot trace.memory_on_oom writes), read back from the
// run log and written for people (the run's error text, `shardscope-cli show`, the runs table's
// tooltip) and as JSON (`show --json`).
#pragma once

#include <QJsonObject>
#include <QString>

#include <vector>

#include "backend/store/runreader.h"
#include "spec/events.h"
#include "spec/result.h"

namespace shardscope::backend {

/// Where memory_viz is: what the snapshot line tells people to open the file with.
inline constexpr char kMemoryVizUrl[] = "https://pytorch.org/memory_viz";

/// One line of figures: "cpu allocator: request 4.0 MiB, allocated 72.6 KiB, limit 6.0 MiB
/// (5.9 MiB left under it), peak 3.5 MiB"; on CUDA reserved, largest free block and the device's
/// free and total memory instead of the limit.
QString oomMemoryText(const spec::OomMemory& memory);

/// The snapshot's path: `runDir`/snapshot ("" when the event names none).
QString oomSnapshotPath(const spec::OomMemory& memory, const QString& runDir);

/// "memory snapshot: PATH, open with https://pytorch.org/memory_viz" ("" when there is none).
QString oomSnapshotLine(const spec::OomMemory& memory, const QString& runDir);

/// The figures as JSON (bytes), with "snapshot" as a path under `runDir` when there is one.
QJsonObject oomMemoryToJson(const spec::OomMemory& memory, const QString& runDir);

struct RankOomMemory {
  int rank = 0;
  spec::OomMemory memory;
};

/// The allocator views of a run's ranks 0..worldSize-1 whose last `error` of the current attempt
/// is an oom carrying one, in rank order (empty for a run that never ran out of memory).
[[nodiscard]] Result<std::vector<RankOomMemory>> oomMemoryOfRun(RunReader& reader, qint64 runId,
                                                                int worldSize);

}  // namespace shardscope::backend
