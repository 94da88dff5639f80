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
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

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

  /// op: all_gather, reduce_scatter, all_reduce, free; stage: issue, wait, done.
  void collective(std::string_view op, std::string_view stage, const std::string& unit,
                  std::string_view phase, std::int64_t bytes, int inflight, bool prefetch = false,
                  std::string_view reason = {});
  void placement(const std::string& flat, std::string_view what, std::string_view device,
                 std::string_view dtype, std::int64_t bytes, bool offloaded = false);
  /// How a flat parameter's shard was initialised: `read` elements from the checkpoint's bytes
  /// of the shard (the rest by the model's seeded init), `shard` elements in all.
  void load(const std::string& flat, std::int64_t read, std::int64_t shard);

 private:
  void line(const std::string& json);

  std::FILE* m_file = nullptr;
  std::int64_t m_step = 0;
  int m_micro = 0;
};

}  // namespace shardscope::shard
