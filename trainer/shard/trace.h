// --trace FILE: one JSON object per line recording every collective's issue and wait per unit,
// every free of a gathered unit, and where each shard and optimizer state lives. Tests read it
// to check prefetch order, the in-flight limit and placement; users read it to see overlap.
//
//   {"t":1.25,"step":3,"micro":0,"op":"all_gather","stage":"issue","unit":"layers.1",
//    "phase":"forward","bytes":4096,"inflight":2,"prefetch":true}
// `prefetch` marks an all-gather issued ahead of need (forward prefetch, backward pre/post),
// as opposed to one issued by the unit that is about to run. All-gather waits carry
// `"reason"`: "need" (the unit runs or is freed next) or "limit" (max_inflight_gathers was
// reached, so the oldest gather was waited before issuing another).
//   {"op":"placement","flat":"layers.1/trainable","what":"master","device":"cpu","dtype":"float32",
//    "bytes":1024,"offloaded":false}
// `offloaded` says the state was put on the CPU by offload_params / offload_optimizer (rather
// than living there because the CPU is the compute device).
//   {"op":"load","flat":"layers.1/frozen","read":512,"shard":520}
// `read` elements of this rank's shard came from the checkpoint, reading only their bytes.
// On CUDA each all-gather and reduce-scatter also gets records timed by CUDA events on its own
// stream, in ms from an origin event recorded when the micro-step's forward starts:
//   {"op":"all_gather","stage":"start","unit":"layers.1","phase":"forward","gpu_ms":0.41}
//   {"op":"all_gather","stage":"end","unit":"layers.1","phase":"forward","gpu_ms":0.93}
// and every all-gather "wait" record carries "exposed_ms": how long the compute stream stood
// waiting for that gather (0 when the gather was done before compute reached it). The hidden
// fraction of gather time is 1 - sum(exposed_ms) / sum(end - start). A micro-step's records are
// written when it ends, once its events are complete, in the order they were made.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::shard {

class Trace {
 public:
  Trace() = default;
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;
  ~Trace();

  /// Opens FILE (rank 0) or FILE.rank-N (other ranks); raises a TrainerError (io) on failure.
  void open(const std::string& path, int rank);
  bool enabled() const { return m_file != nullptr; }
  void set_position(std::int64_t step, int micro) {
    m_step = step;
    m_micro = micro;
  }

  /// op: all_gather, reduce_scatter, all_reduce, free; stage: issue, wait, done. Returns the
  /// record's index while deferring (to add a field with set()), else -1.
  int collective(std::string_view op, std::string_view stage, const std::string& unit,
                 std::string_view phase, std::int64_t bytes, int inflight, bool prefetch = false,
                 std::string_view reason = {});
  /// A collective's start and end on its CUDA stream (ms from the micro-step's origin).
  void gpu_span(std::string_view op, const std::string& unit, std::string_view phase,
                double start_ms, double end_ms);
  /// Deferring keeps records in memory until flush(), so GPU times can be added to them.
  void defer(bool on) { m_defer = on; }
  void set(int record, const char* key, double value);
  void flush();
  void placement(const std::string& flat, std::string_view what, std::string_view device,
                 std::string_view dtype, std::int64_t bytes, bool offloaded = false);
  /// How a flat parameter's shard was initialised: `read` elements from the checkpoint's bytes
  /// of the shard (the rest by the model's seeded init), `shard` elements in all.
  void load(const std::string& flat, std::int64_t read, std::int64_t shard);
  /// The host memory once every flat's shard is initialised (checkpoint read, NF4 quantized):
  /// the counting allocator's live bytes and its peak so far (loading's peak), and the RSS.
  void loaded(std::int64_t allocated, std::int64_t peak, std::int64_t rss);

 private:
  void line(const std::string& json);

  std::FILE* m_file = nullptr;
  bool m_defer = false;
  std::vector<std::string> m_keys;   // deferred records' added fields, per record
  std::vector<std::string> m_lines;  // deferred records, written by flush()
  std::int64_t m_step = 0;
  int m_micro = 0;
};

}  // namespace shardscope::shard
