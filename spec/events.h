// Event protocol v1: the JSON Lines each rank of `shardtrain` writes on stdout, and the only
// thing the backend reads from a running trainer. Frozen: tests/spec/golden/ holds one
// golden line per kind; changing a field name, unit or meaning bumps kProtocolVersion.
//
// Every line is one JSON object: {"v":1,"ev":KIND,"rank":R,"seq":S,"t":T, ...payload}
//   v     protocol version (int)          rank  global rank (int, 0-based)
//   seq   per-rank counter from 0 (int)   t     unix time in seconds (float, ms precision)
// Units: bytes for memory and traffic, seconds for time, tokens/s for throughput, fractions
// (0..1) for MFU. A non-finite float (a diverged loss) is written as null and read back as NaN.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "spec/estimate.h"
#include "spec/result.h"
#include "spec/status.h"

namespace shardscope::spec {

inline constexpr int kProtocolVersion = 1;

/// `hello`: the first line of every rank, before any collective.
/// The device a rank computes on (`hello.device`, optional: absent from older trainers).
struct DeviceSummary {
  std::string type;               // "cpu" or "cuda"
  int index = 0;                  // CUDA device index in the rank's visible devices
  std::string name;               // "NVIDIA H100 80GB HBM3", or the CPU model
  std::int64_t memory_bytes = 0;  // device memory (CPU: physical memory)
  std::string capability;         // CUDA compute capability "9.0"; empty on CPU

  bool operator==(const DeviceSummary&) const = default;
};

struct HelloEvent {
  int world_size = 0;
  int local_world_size = 0;
  std::string config_hash;                      // sha256 of the resolved config, hex
  std::map<std::string, std::string> versions;  // "shardtrain", "torch", "backend" (gloo/nccl)
  std::int64_t params_total = 0;                // parameter count of the whole model
  std::int64_t params_trainable = 0;            // those that receive gradients
  std::int64_t mem_estimate = 0;                // bytes per rank, from spec's estimate
  std::optional<DeviceSummary> device;          // where the rank computes
  /// Model FLOPs per trained token (spec::training_flops_per_token at data.seq_len): what `mfu`
  /// divides by, so a reader can recompute it. Absent from older trainers.
  std::optional<double> flops_per_token;
  /// data.pack: real tokens over row slots (rows x seq_len) of the run's first epoch, in (0, 1].
  /// Absent when samples are not packed (and from older trainers).
  std::optional<double> pack_efficiency;
  /// Chat data: what the loaded training samples hold that mem_estimate was bounded by (the
  /// longest sample, the most image tokens, the shortest with an image), so a reader recomputes
  /// the same figure. Absent for other formats (and from older trainers).
  std::optional<DataBound> data_bound;
};

/// `step`: one optimizer step finished (rank 0 only).
struct StepEvent {
  std::int64_t step = 0;                  // optimizer steps done, from 1
  double loss = 0;                        // mean training loss of the step
  double lr = 0;                          // learning rate used by the step
  double grad_norm = 0;                   // global norm before clipping
  double tokens_per_s = 0;                // real tokens of all ranks per wall second
  double mfu = 0;                         // model FLOPs utilisation, 0..1
  std::int64_t all_gather_bytes = 0;      // bytes this rank all-gathered in the step
  std::int64_t reduce_scatter_bytes = 0;  // bytes this rank reduce-scattered in the step
};

/// `eval`: metrics of an evaluation at a step; pruners read these.
struct EvalEvent {
  std::int64_t step = 0;
  std::map<std::string, double> metrics;  // "loss", "accuracy", ...
};

/// `mem`: memory of one rank at a step (every rank), in bytes.
struct MemEvent {
  std::int64_t step = 0;
  std::int64_t allocated = 0;  // host: the trainer's counting allocator
  std::int64_t reserved = 0;
  std::int64_t peak = 0;
  std::int64_t rss = 0;
  /// CUDA runs: the caching allocator's bytes on the rank's GPU (absent on CPU).
  std::optional<std::int64_t> cuda_allocated;
  std::optional<std::int64_t> cuda_reserved;
  std::optional<std::int64_t> cuda_peak;
};

/// `ckpt`: a checkpoint is complete on disk (written only after the rename).
struct CkptEvent {
  std::int64_t step = 0;
  std::string path;  // relative to the run directory
  std::string kind;  // sharded | full | adapter
};

/// `log`: a message worth showing beside the curves (human logs go to stderr).
struct LogEvent {
  std::string level;  // debug | info | warn | error
  std::string message;
};

/// `done`: the rank ends; objective is a number, an array (several objectives) or absent.
struct DoneEvent {
  DoneStatus status = DoneStatus::complete;
  std::vector<double> objective;    // empty: none; one value is written as a number
  bool objective_is_array = false;  // true when written (or to be written) as an array
  std::optional<std::int64_t> steps;
};

/// `error.memory`: the allocator's view at the moment an allocation was refused (kind oom only;
/// absent when the allocator said nothing, and from older trainers), in bytes.
struct OomMemory {
  std::string device;          // "cpu" (the counting allocator) or "cuda" (the caching allocator)
  std::int64_t request = 0;    // the allocation that failed (CUDA: rounded to the block size)
  std::int64_t allocated = 0;  // live tensor bytes when it failed (the request not included)
  std::int64_t peak = 0;       // max of allocated since the last reset (CUDA: since the start)
  std::optional<std::int64_t> limit;         // CPU: SHARDSCOPE_HOST_MEMORY_LIMIT
  std::optional<std::int64_t> reserved;      // CUDA: bytes the caching allocator holds
  std::optional<std::int64_t> largest_free;  // CUDA: largest free block of its segments
  std::optional<std::int64_t> capacity;      // CUDA: the device's memory (or the allowed part)
  std::optional<std::int64_t> device_free;   // CUDA: what the driver still had free
  std::optional<std::string> snapshot;       // CUDA, trace.memory_on_oom: the pickled allocator
                                             // history, relative to the run directory
  bool operator==(const OomMemory&) const = default;
};

/// `error`: why this rank fails, with what to do about it; a `done` may not follow.
struct ErrorEvent {
  ErrorKind kind = ErrorKind::internal;
  std::string message;
  std::string hint;
  std::optional<OomMemory> memory;  // kind oom: the allocator's view (see OomMemory)
};

/// `phases`: where one rank's wall time of an optimizer step went, in seconds (every rank,
/// every step). Every instant of the step belongs to exactly one phase, so data + forward +
/// backward + optimizer + comm_exposed + copy + other = wall. forward and backward are compute
/// only: a wait for a collective inside them is comm_exposed. comm_total is how long at least one
/// of this rank's collectives was in flight, each from its issue to the end of its wait
/// (overlapped with compute or not; on the CPU the end is when the rank saw the result, so an
/// upper bound), never more than wall; comm_exposed / comm_total is the share left exposed.
struct PhasesEvent {
  std::int64_t step = 0;
  double wall = 0;          // the step's wall time on this rank
  double data = 0;          // choosing and building the step's micro-batches
  double forward = 0;       // forward compute
  double backward = 0;      // backward compute (gradient reduction issued, not waited)
  double optimizer = 0;     // clipping, the gradient norm, the optimizer update, zeroing
  double comm_exposed = 0;  // waiting on collectives (gathers, reductions, control all-reduces)
  double comm_total = 0;    // while any collective was in flight, overlapped or not
  double copy = 0;          // host-device copies (0 on the CPU)
  double other = 0;         // the rest (the loss's read-back, bookkeeping)
};
/// `sys`: the rank's process and host, and its GPU where it has one, sampled by a thread every
/// period (every rank; `step`: the optimizer steps done when sampled). GPU figures come from NVML,
/// each absent when NVML or the device does not report it.
struct GpuSample {
  std::optional<double> util;            // fraction of the period a kernel ran, 0..1
  std::optional<double> sm_clock_mhz;    // SM clock
  std::optional<double> power_w;         // board power draw
  std::optional<double> power_limit_w;   // the enforced power limit
  std::optional<double> temp_c;          // GPU temperature
  std::optional<std::int64_t> mem_used;  // device memory used by every process (bytes)
  std::optional<double> pcie_tx;         // PCIe bytes/s sent by the device
  std::optional<double> pcie_rx;         // PCIe bytes/s received
  bool operator==(const GpuSample&) const = default;
};
struct SysEvent {
  std::int64_t step = 0;
  double cpu = 0;        // cores the process kept busy over the period (user + system time)
  std::int64_t rss = 0;  // resident set size (bytes)
  double load1 = 0;      // the host's 1-minute load average
  std::optional<GpuSample> gpu;
};
/// `sample`: one probe's answer at an evaluation or at the end of training (rank 0, one per line
/// of eval.probes). The scores are present when the probe has a reference.
struct SampleEvent {
  std::int64_t step = 0;
  std::string probe;                     // the line's `id`, else its 1-based line number
  std::string prompt;                    // the text of the probe's last user turn
  std::vector<std::string> images;       // the probe's images as copied, relative to the run dir
  std::string text;                      // the generated text (stop token excluded)
  std::int64_t tokens = 0;               // tokens generated (stop token excluded)
  std::optional<std::string> reference;  // the expected answer
  std::optional<bool> exact_match;       // text == reference, both stripped
  std::optional<double> f1;              // token F1 on white-space words, 0..1
  std::optional<double> cer;             // character error rate: edits / reference characters
};
using Payload = std::variant<HelloEvent, StepEvent, EvalEvent, MemEvent, CkptEvent, LogEvent,
                             DoneEvent, ErrorEvent, PhasesEvent, SysEvent, SampleEvent>;

/// The fields every line carries.
struct Envelope {
  int v = kProtocolVersion;
  int rank = 0;
  std::int64_t seq = 0;  // -1 when a lenient line had none (the reader's caller numbers it)
  double t = 0;          // NaN when a lenient line had none (the caller stamps arrival time)
};

struct Event {
  Envelope env;
  Payload body;
};

/// The `ev` name of a payload: "hello", "step", ...
std::string_view kind_name(const Payload& body);

/// One line of JSON, without the newline; fields in protocol order.
std::string encode_event(const Event& event);

enum class ParseMode {
  strict,   // a shardtrain rank: v, rank, seq and t are required
  lenient,  // any program used as a search trial: they default to 1, 0, -1 and NaN
};

/// Parses one line. Errors name the field and what was expected, e.g.
/// "step.loss: expected a number, got \"abc\"".
Result<Event> parse_event(std::string_view line, ParseMode mode = ParseMode::strict);

/// Writes events of one rank, numbering them and stamping the time; flushes every line so a
/// tailing backend sees it at once. Thread-safe: the training thread, the `sys` sampler and the
/// watchdog write through one writer, each line whole and numbered in order.
class EventWriter {
 public:
  EventWriter(int rank, std::FILE* out);
  /// Writes and flushes one line; false when the stream refused it (a full disk). The first
  /// failure is kept: ok() stays false and error() says why.
  bool write(const Payload& body);
  std::int64_t next_seq() const;
  bool ok() const;
  std::string error() const;

 private:
  mutable std::mutex m_mutex;  // guards everything below
  int m_rank;
  std::FILE* m_out;
  std::int64_t m_seq = 0;
  std::string m_error;
};

/// Unix time in seconds with millisecond precision, as `t` carries it.
double unix_time_now();

}  // namespace shardscope::spec
