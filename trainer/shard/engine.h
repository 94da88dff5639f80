// The sharding engine: FSDP semantics over c10d collectives for a model::Model.
//
// Wrap units (by policy) each own one flat parameter per requires-grad group. Forward:
// all-gather a unit before its first layer (optionally prefetching the next unit), free it after
// its last layer (FULL_SHARD) or keep it (SHARD_GRAD_OP); the root unit (everything no policy
// wrapped: embedding and head) stays gathered from forward to the end of backward. Backward: a
// hook on a unit's output gradient gathers it again (prefetching the next unit in backward order
// when backward_prefetch = pre), the gradient of its flat buffer is reduce-scattered within the
// shard group (then all-reduced across replicas for HYBRID_SHARD; NO_SHARD all-reduces) and added
// to the fp32 sharded gradient. See docs/trainer.md, "The sharding engine".
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "spec/experiment.h"
#include "trainer/dist/device.h"
#include "trainer/dist/process_group.h"
#include "trainer/model/model.h"
#include "trainer/shard/flat_param.h"
#include "trainer/shard/trace.h"

namespace shardscope::shard {

/// The process groups one rank uses.
struct Groups {
  dist::ProcessGroup* world = nullptr;      // every rank (loss token counts, control flags)
  dist::ProcessGroup* shard = nullptr;      // parameters are sharded across these ranks
  dist::ProcessGroup* replicate = nullptr;  // holders of the same shard (gradient all-reduce)
};

/// A parameter tied to another of the same unit (lm_head.weight to model.embed_tokens.weight):
/// it has no storage of its own; its layer gets the owner's view, so both uses' gradients sum
/// into the owner's slot of the flat buffer.
struct TiedParam {
  int layer = 0;  // the tied parameter's layer and index
  int index = 0;
  std::string name;  // its HF name
  int owner_layer = 0;
  int owner_index = 0;
  std::string owner;  // the owner's HF name
};

/// One wrap unit.
struct Unit {
  std::string name;
  std::vector<int> layers;  // model layer indices, ascending
  bool root = false;
  std::vector<FlatParam> flats;
  std::vector<TiedParam> tied;  // parameters that view an owner's slot instead of having one
  // Per micro-step state.
  bool active = false;     // views built for this micro-step
  bool gathering = false;  // an all-gather was issued and not yet waited
  bool backward_done = false;
  int trainable_pending = 0;  // trainable flats whose gradient has not arrived yet
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::optional<c10::Event> gathered;  // CUDA: recorded on the gather stream once gathered
};

class ShardEngine {
 public:
  /// Parameters the model marks frozen (train.freeze, LoRA bases) go to their unit's frozen flat.
  /// On a CUDA `device` gathered units, activations and gradients live there; the fp32 masters
  /// too, unless shard.offload_params keeps them in pinned host memory.
  ShardEngine(const model::Model& model, const spec::ShardSection& shard, Groups groups,
              Trace* trace, c10::Device device = c10::Device(c10::kCPU));
  ShardEngine(const ShardEngine&) = delete;
  ShardEngine& operator=(const ShardEngine&) = delete;

  /// Every rank computes the initial values layer by layer and keeps its own shards.
  void init_params(std::uint64_t seed);

  /// One micro-batch forward and backward. `loss_scale` multiplies the summed token loss (1 /
  /// the global loss-token count); `reduce` is false on micro-steps that only accumulate.
  /// Returns this rank's scaled loss contribution.
  double forward_backward(const model::Batch& batch, double loss_scale, bool reduce);
  /// Labels trace records with the optimizer step and micro-step they belong to.
  void set_position(std::int64_t step, int micro) {
    if (m_trace) m_trace->set_position(step, micro);
  }
  /// Records where the optimizer state of each trainable flat lives (the trace's placement).
  void trace_optimizer_state(const std::vector<at::Tensor>& exp_avg,
                             const std::vector<at::Tensor>& exp_avg_sq);
  /// Tokens per chunk of the head's fused linear cross-entropy (train.loss_chunk_tokens; 0, the
  /// default: chosen from the model's shape and, on CUDA, the device's free memory).
  void set_loss_chunk_tokens(std::int64_t tokens) { m_loss_chunk_tokens = tokens; }
  /// Forward only (evaluation): returns this rank's scaled loss contribution.
  double forward_only(const model::Batch& batch, double loss_scale);
  /// Generation's many small forwards: with `on`, forward_only keeps every unit gathered from
  /// one call to the next (one all-gather per unit for a whole generation instead of one per
  /// token) when all gathered parameters take at most half of the free memory on every rank of
  /// the shard group (a collective: every rank calls it); `false` frees them. Returns whether
  /// the units are held, and sets `bytes` to what holding them takes on this rank.
  bool hold_gathered(bool on, std::int64_t* bytes = nullptr);

  /// Global L2 norm of the sharded gradients (every rank gets the same value).
  double grad_norm();
  /// Multiplies every sharded gradient by `factor` (clipping, unscaling).
  void scale_grads(double factor);
  /// True on every rank when any rank's gradient has an inf or NaN (the fp16 scaler's check).
  bool grads_nonfinite();
  /// Drops every sharded gradient (set to none, like torch's zero_grad(set_to_none=True)).
  void zero_grads();

  std::vector<Unit>& units() { return m_units; }
  const std::vector<Unit>& units() const { return m_units; }
  /// Trainable flat parameters (the optimizer's parameters), unit order.
  std::vector<FlatParam*> trainable_flats();
  const spec::PrecisionDTypes& precision() const { return m_prec; }
  const Groups& groups() const { return m_groups; }
  c10::Device device() const { return m_device; }
  /// Parameters that receive gradients (in trainable flats).
  std::int64_t params_trainable() const;
  /// Full fp32 value of every parameter by HF name (a collective: every rank calls it); an NF4
  /// weight's is its dequantized value.
  std::vector<std::pair<std::string, at::Tensor>> full_state();
  /// Full fp32 gradient of every trainable parameter by HF name, as reduced (a collective);
  /// empty before the first reduction. Tied parameters appear once, under their owner's name.
  std::vector<std::pair<std::string, at::Tensor>> full_grads();

  // Called by the autograd pieces (engine.cpp); not for other users.
  void on_flat_grad(Unit& unit, FlatParam& flat, const at::Tensor& grad);
  void on_pre_backward(Unit& unit);
  void on_unit_backward_done(Unit& unit);

 private:
  void trace_init(const FlatParam& flat, std::int64_t read_elements);
  /// Fills an NF4 flat's master shard with the records of its weights; returns the checkpoint
  /// elements read.
  std::int64_t init_nf4(FlatParam& flat, const std::map<int, std::vector<at::Tensor>>& computed);
  /// An NF4 flat's gathered records (`packed`) dequantized into its `full` buffer.
  void dequantize(FlatParam& flat);
  void build_units(const spec::ShardSection& shard);
  void tie_params();
  void issue_gather(Unit& unit, const char* phase, bool prefetch = false);
  /// `reason`: "need" (the unit is about to run or be freed) or "limit" (max_inflight_gathers).
  void wait_gather(Unit& unit, const char* phase, const char* reason = "need");
  void free_unit(Unit& unit, const char* phase);
  void activate(Unit& unit);
  at::Tensor run_unit_layers(Unit& unit, std::size_t& layer_pos, at::Tensor x,
                             const model::LayerContext& ctx);
  Unit* next_backward(const Unit& unit);
  Unit* next_forward(const Unit& unit);
  void finish_reductions();
  void finish_one_reduction();
  void reset_micro_state();
  at::Tensor run_forward(const model::Batch& batch, double loss_scale);
  /// CUDA: the batch's tensors on the device (m_batch) and the context's tables moved there.
  void place_batch(const model::Batch& batch, model::LayerContext& ctx);
  /// Trace records are made for this micro-step (a trace is open and this step is sampled).
  bool tracing() const { return m_trace && m_trace->recording(); }
  /// Where a trace record's GPU times go (tracing, CUDA); written when the micro-step ends.
  bool timing() const { return tracing() && m_streams.active(); }
  /// Tracing: the stretch of backward compute since the last boundary ends now (recorded for
  /// the unit that ran it); begin_backward_stretch starts the next one, run by `unit`.
  void end_backward_stretch();
  void begin_backward_stretch(const Unit* unit);
  void flush_timing();
  /// Gives a gathered buffer's storage back (on CUDA after recording the compute stream as a
  /// user of the block, so it is reused only once the compute stream is done with it).
  void release(FlatParam& flat);

  const model::Model& m_model;
  spec::ShardSection m_shard;
  spec::PrecisionDTypes m_prec;
  Groups m_groups;
  Trace* m_trace = nullptr;
  std::vector<Unit> m_units;
  std::vector<int> m_unit_of_layer;
  std::vector<int> m_order;      // unit activation order of this micro-step
  std::deque<Unit*> m_inflight;  // units with an issued, un-waited all-gather
  bool m_reduce = true;
  bool m_grad_enabled = true;
  bool m_hold_gathered = false;  // forward_only keeps units gathered (hold_gathered)
  std::vector<std::vector<at::Tensor>> m_layer_params;  // views per layer, this micro-step
  model::LayerContext m_ctx;  // this micro-step's context (checkpointed units read it in backward)
  c10::Device m_device;
  std::int64_t m_loss_chunk_tokens = 0;  // train.loss_chunk_tokens
  dist::Streams m_streams;  // CUDA: compute, gather and reduce streams; inactive on CPU
  model::Batch m_batch;     // CUDA: this micro-step's batch on the device
  // --trace on CUDA: each collective's start and end on its stream, and for each all-gather
  // wait the time the compute stream stood still (events before and after the wait).
  struct GpuSpan {
    std::string op;
    std::string unit;
    std::string phase;
    c10::Event start;
    c10::Event end;
  };
  struct Exposed {
    int record;  // the trace's deferred "wait" record
    c10::Event before;
    c10::Event after;
  };
  const Unit* m_backward_unit = nullptr;  // tracing: the unit whose backward runs now
  double m_backward_from = 0;             // tracing: when its stretch began (trace ms)
  std::optional<c10::Event> m_origin;     // the micro-step's time origin on the compute stream
  std::vector<GpuSpan> m_spans;
  std::vector<Exposed> m_exposed;

  struct PendingReduce {
    FlatParam* flat;
    Unit* unit;
    at::Tensor out;  // (N) reduce dtype (Gloo: a view into the summed (P)), or (P) for NO_SHARD
    c10::intrusive_ptr<c10d::Work> work;
    bool second_stage = false;       // HYBRID: the replica all-reduce was issued
    at::Tensor input;                // CUDA: the reduction's input, alive until `done` is waited
    std::optional<c10::Event> done;  // CUDA: recorded on the reduce stream once reduced
  };
  std::deque<PendingReduce> m_reductions;
};

at::ScalarType to_scalar_type(spec::DType dtype);

}  // namespace shardscope::shard
