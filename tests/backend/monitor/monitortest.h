// Helpers shared by the monitor's tests: where the helper programs are, and counting a file's
// lines and a query's rows to compare what was stored with what was written.
#pragma once

#include <QFile>
#include <QString>

#include <string>

#include "backend/store/runreader.h"
#include "tests/support/paths.h"

namespace monitortest {

inline const QString kBin = shardscope::testing::binaryDir() + "/tests/bin/";
inline constexpr int kDeadlineMs = 60000;

/// Complete lines of a file (0 when it does not exist).
inline qint64 lineCount(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return 0;
  return file.readAll().count('\n');
}

/// The single integer a query returns; -1 when it fails.
inline qint64 queryInt(shardscope::backend::RunReader& reader, const QString& sql) {
  auto text = reader.db().queryText(sql.toStdString());
  return text ? std::stoll(*text) : -1;
}

/// "" when every line of every rank file in `dir` is exactly one row of run `runId` (an event, or
/// a log line) and no event offset is stored twice; else what differs.
inline QString rowsEqualLines(shardscope::backend::RunReader& reader, const QString& dir,
                              qint64 runId, int worldSize) {
  for (int rank = 0; rank < worldSize; ++rank) {
    const qint64 eventLines = lineCount(dir + QString("/events-rank-%1.jsonl").arg(rank));
    const qint64 logLines = lineCount(dir + QString("/rank-%1.log").arg(rank));
    const QString where = QString("run_id = %1 AND rank = %2").arg(runId).arg(rank);
    const qint64 events = queryInt(reader, "SELECT count(*) FROM events WHERE " + where);
    const qint64 eventRows =
        events +
        queryInt(reader, "SELECT count(*) FROM log_lines WHERE file = 'events' AND " + where);
    const qint64 logRows =
        queryInt(reader, "SELECT count(*) FROM log_lines WHERE file = 'log' AND " + where);
    const qint64 offsets =
        queryInt(reader, "SELECT count(DISTINCT file_offset) FROM events WHERE " + where);
    if (eventLines == 0 || eventRows != eventLines || logRows != logLines || offsets != events) {
      return QString(
                 "rank %1: %2 event lines, %3 rows; %4 log lines, %5 rows; %6 events at %7 "
                 "distinct offsets")
          .arg(rank)
          .arg(eventLines)
          .arg(eventRows)
          .arg(logLines)
          .arg(logRows)
          .arg(events)
          .arg(offsets);
    }
  }
  return {};
}

}  // namespace monitortest
