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
//
// Step-relative times and compute spans (every mode): each collective record carries "ms", the
// host's steady clock in milliseconds from the origin of its optimizer step (taken when the
// step's first micro-step starts; one clock per rank), and each "wait" record also "done_ms",
// when the wait returned ("ms" is when it began), so a collective is issue -> wait -> done.
// Compute gets one record per stretch of a unit's forward or backward on the host:
//   {"op":"compute","stage":"done","unit":"layers.1","phase":"backward","ms":3.2,"end_ms":5.9,...}
// (the root unit has two in each phase: the embedding and, at the other end, the head). On CUDA
// these host times say when work was queued; the GPU's own times are the gpu_ms records.
//
// Sampled mode (trace.every_n_steps = N): run_dir/trace/rank-R.jsonl, only optimizer steps N,
// 2N, ... recorded (nothing at all is done on the others); once the file reaches
// trace.max_mib, one {"op":"stopped","reason":"max_mib","bytes":B} record closes it.
#pragma once

#include <chrono>

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
  /// Sampled mode: opens `file` (its folder is created), recording only the optimizer steps that
  /// are multiples of `every_n_steps`, and nothing once the file holds `max_bytes`.
  void open_sampled(const std::string& file, std::int64_t every_n_steps, std::int64_t max_bytes);
  bool enabled() const { return m_file != nullptr; }
  /// Whether records are being made now: the engine does no trace work when false.
  bool recording() const { return m_file != nullptr && m_on; }
  /// Micro-step `micro` of optimizer step `step` starts (micro 0 sets the step's time origin).
  void set_position(std::int64_t step, int micro);
  /// The optimizer step's micro-steps are over: sampled mode records nothing until the next
  /// recorded step (evaluation's forwards included).
  void end_step();
  /// True once, after the file reached its size bound (the caller logs it).
  bool take_stopped_notice() {
    const bool notice = m_full && !m_noticed;
    if (notice) m_noticed = true;
    return notice;
  }
  std::int64_t bytes_written() const { return m_bytes; }
  /// Milliseconds on the steady clock since the current step's origin.
  double now_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_origin)
        .count();
  }

  /// op: all_gather, reduce_scatter, all_reduce, free; stage: issue, wait, done. Returns the
  /// record's index while deferring (to add a field with set()), else -1.
  /// `wait_ms`: for a "wait", when it began (now_ms() before waiting); the record's time is then
  /// that, and "done_ms" now.
  int collective(std::string_view op, std::string_view stage, const std::string& unit,
                 std::string_view phase, std::int64_t bytes, int inflight, bool prefetch = false,
                 std::string_view reason = {}, double wait_ms = -1);
  /// A stretch of `unit`'s compute in `phase` (forward, backward), ms from the step's origin.
  void compute(const std::string& unit, std::string_view phase, double start_ms, double end_ms);
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
  /// Writes (or defers) one record; false when the size bound dropped it.
  bool line(const std::string& json);

  std::FILE* m_file = nullptr;
  bool m_on = true;              // records are being made (see recording())
  std::int64_t m_every = 0;      // sampled mode: the step period; 0 records every step
  std::int64_t m_max_bytes = 0;  // sampled mode: the file's bound; 0 unbounded
  std::int64_t m_bytes = 0;      // bytes written or deferred so far
  bool m_full = false;           // the bound was reached: no more records
  bool m_noticed = false;        // take_stopped_notice() has said so
  bool m_stop_written = false;   // the closing "stopped" record is in the file
  std::chrono::steady_clock::time_point m_origin = std::chrono::steady_clock::now();
  bool m_defer = false;
  std::vector<std::string> m_keys;   // deferred records' added fields, per record
  std::vector<std::string> m_lines;  // deferred records, written by flush()
  std::int64_t m_step = 0;
  int m_micro = 0;
};

}  // namespace shardscope::shard
