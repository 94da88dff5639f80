// The per-unit trace reader (backend/monitor/unittrace): the input is one rank's trace file. It
// is read or refused with an error naming the file; what it reads keeps its promises: spans in
// a step the file named, collectives with their wait inside issue..done as recorded, compute
// without a wait.
#include <QString>

#include "backend/monitor/unittrace.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::as_file(data, size, "rank-3.jsonl");
  backend::UnitTrace trace;
  const auto read = backend::readUnitTraceFile(QString::fromStdString(path), 3, trace);
  if (!read) {
    fuzz::expect_clear_error(read.message(), path);
    return 0;
  }
  for (const auto& [number, step] : trace.steps) {
    for (const auto& [rank, r] : step.ranks) {
      if (rank != 3 || r.rank != 3) fuzz::broken("a span of a rank the file is not");
      for (const auto& span : r.spans) {
        if (span.unit.isEmpty()) fuzz::broken("a span without its unit");
        if (!span.isCollective() && span.waitFrom != -1) fuzz::broken("compute with a wait");
        if (span.isCollective() && span.phase.isEmpty()) fuzz::broken("a collective's phase");
      }
    }
  }
  return 0;
}
