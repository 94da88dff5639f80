#include "trainer/model/dense.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace shardscope::model {
namespace {

std::atomic<std::int64_t> g_onednn_gemms{0};

// mkldnn::_linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, Scalar?[] scalars,
// str? algorithm) -> Tensor: X (M, in) or (..., in) times W^T plus B through oneDNN's inner
// product, W used in place with its strides. LibTorch registers it for Inductor; reaching it
// through the dispatcher needs no oneDNN header and degrades to at::linear where it is absent.
using PointwiseFn = at::Tensor(const at::Tensor&, const at::Tensor&,
                               const std::optional<at::Tensor>&, c10::string_view,
                               c10::List<std::optional<c10::Scalar>>,
                               std::optional<c10::string_view>);
using PointwiseOp = c10::TypedOperatorHandle<PointwiseFn>;

const PointwiseOp* onednn_op() {
  static const PointwiseOp* op = []() -> const PointwiseOp* {
    const char* env = std::getenv("SHARDSCOPE_CPU_GEMM");
    if (env != nullptr && std::string_view(env) == "blas") return nullptr;
    const auto handle = c10::Dispatcher::singleton().findOp({"mkldnn::_linear_pointwise", ""});
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU)) return nullptr;
    try {
      return new PointwiseOp(handle->typed<PointwiseFn>());  // never freed: one per process
    } catch (const c10::Error&) {  // another signature in another LibTorch: keep at::linear
      return nullptr;
    }
  }();
  return op;
}

// Below ~2M multiply-adds, or with fewer than 4 rows (a generation step's GEMV), oneDNN's ~12 us
// more per call outweighs its faster kernel: at 1 row x 768 x 768 it took 66 us against BLAS's
// 45; at 4 x 768 x 768, 125 against 139 (one thread).
constexpr double kMinMultiplyAdds = 2.0 * 1024 * 1024;

bool worth_onednn(std::int64_t rows, std::int64_t cols, std::int64_t inner) {
  return rows >= 4 &&
         static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(inner) >=
             kMinMultiplyAdds;
}

bool cpu_float(const at::Tensor& t) {
  return !t.defined() ||
         (t.device().is_cpu() && t.layout() == at::kStrided && t.scalar_type() == at::kFloat);
}

// oneDNN reads a strided `a` (dW's g^T) as a contiguous copy first: rows x inner elements moved
// for rows x inner x cols multiply-adds. Below 512 columns the copy costs more than oneDNN gains
// (bench_gemm.py: dW at in = 256 ran 0.84-0.93x BLAS's; at in = 768..3072, 1.02-1.26x).
constexpr std::int64_t kMinColsForCopy = 512;

// a (..., k) times b^T for b (n, k), plus bias (n): one GEMM, by oneDNN when it pays.
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias = {}) {
  const auto* op = onednn_op();
  if (op == nullptr || !cpu_float(a) || !cpu_float(b) || !cpu_float(bias) || a.dim() < 2 ||
      b.dim() != 2 ||
      !worth_onednn(a.numel() / std::max<std::int64_t>(1, a.size(-1)), b.size(0), b.size(1)) ||
      (!a.is_contiguous() && b.size(0) < kMinColsForCopy)) {
    return bias.defined() ? at::linear(a, b, bias) : at::linear(a, b);
  }
  g_onednn_gemms.fetch_add(1, std::memory_order_relaxed);
  const std::optional<at::Tensor> maybe_bias =
      bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt;
  return op->call(a, b, maybe_bias, "none", c10::List<std::optional<c10::Scalar>>(), std::nullopt);
}

// at::linear's derivatives (dx = g W, dW = g^T x, db = sum of g's rows), each GEMM through
// gemm(). dW's GEMM reads g^T, which oneDNN takes as a contiguous copy of (out, M): at 512 rows
// and out = 8192 that is 16 MiB for the call, and still faster than BLAS reading g transposed.
torch::autograd::variable_list dense_grads(torch::autograd::AutogradContext* ctx,
                                           const at::Tensor& upstream, bool bias) {
  const auto saved = ctx->get_saved_variables();
  const auto& x = saved[0];                          // (..., in)
  const auto& w = saved[1];                          // (out, in)
  const auto g = upstream.reshape({-1, w.size(0)});  // (M, out)
  torch::autograd::variable_list out(bias ? 3 : 2);
  if (ctx->needs_input_grad(0)) out[0] = gemm(g, w.t()).view(x.sizes());                // (..., in)
  if (ctx->needs_input_grad(1)) out[1] = gemm(g.t(), x.reshape({-1, x.size(-1)}).t());  // (out, in)
  if (bias && ctx->needs_input_grad(2)) out[2] = g.sum(0);                              // (out)
  return out;
}

// Two functions: LibTorch's custom functions take no undefined tensor input (no bias).
struct DenseFn : public torch::autograd::Function<DenseFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w) {
    ctx->save_for_backward({x, w});
    return gemm(x, w);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return dense_grads(ctx, grads[0], false);
  }
};

struct DenseBiasFn : public torch::autograd::Function<DenseBiasFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, const at::Tensor& b) {
    ctx->save_for_backward({x, w});
    return gemm(x, w, b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return dense_grads(ctx, grads[0], true);
  }
};

}  // namespace

at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  // Under autocast at::linear computes in the autocast dtype: the oneDNN operator is not on
  // autocast's list and would compute in float32.
  if (onednn_op() == nullptr || !cpu_float(x) || !cpu_float(w) || !cpu_float(b) ||
      at::autocast::is_autocast_enabled(at::kCPU))
    return b.defined() ? at::linear(x, w, b) : at::linear(x, w);  // with its own autograd
  const bool differentiable =
      at::GradMode::is_enabled() &&
      (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()));
  if (!differentiable) return gemm(x, w, b);
  return b.defined() ? DenseBiasFn::apply(x, w, b) : DenseFn::apply(x, w);
}

bool onednn_dense_enabled() { return onednn_op() != nullptr; }

std::int64_t onednn_dense_gemms() { return g_onednn_gemms.load(std::memory_order_relaxed); }

}  // namespace shardscope::model
