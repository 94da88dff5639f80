// The backend's event stream parser (backend/monitor/eventstream): the input is what reads of
// events-rank-N.jsonl and rank-N.log returned, cut into reads at the input's 0x01 bytes, some of
// them "full" (a read that filled its buffer). Every byte must be accounted for exactly once:
// the offsets advance to the end of the last complete line, and no row points past the input.
#include <QByteArray>
#include <QList>

#include "backend/monitor/eventstream.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

namespace {

void check_chunk(const backend::FileChunk& chunk, qint64 start, qint64 end) {
  if (chunk.startOffset != start) fuzz::broken("a chunk does not start at the stored offset");
  if (chunk.endOffset < start || chunk.endOffset > end)
    fuzz::broken("a chunk ends outside the bytes it was given");
  for (const auto& log : chunk.logs)
    if (log.offset < start || log.offset >= end) fuzz::broken("a log row outside the chunk");
}

// Feeds one file's reads; `events` picks the parser.
void feed(const QList<QByteArray>& reads, bool events) {
  backend::EventStream stream;
  QByteArray pending;  // bytes after the last complete line, read again with the next read
  for (qsizetype i = 0; i < reads.size(); ++i) {
    const QByteArray bytes = pending + reads[i];
    const bool full = !reads[i].isEmpty() && (reads[i].size() % 7) == 0;
    qint64& offset = events ? stream.eventsOffset : stream.logOffset;
    const qint64 start = offset;
    const auto chunk = events ? backend::parseEventsChunk(1, bytes, stream, full)
                              : backend::parseLogChunk(1, bytes, stream, full);
    check_chunk(chunk, start, start + bytes.size());
    if (offset != chunk.endOffset) fuzz::broken("the stream offset is not the chunk's end");
    pending = bytes.mid(offset - start);
    if (stream.lastLogLines.size() > backend::kLastWordsLines)
      fuzz::broken("more last words kept than kLastWordsLines");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const QByteArray input(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  const QList<QByteArray> reads = input.split('\x01');
  feed(reads, true);
  feed(reads, false);
  return 0;
}
