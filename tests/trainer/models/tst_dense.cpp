// model::dense, the models' Linear: its values and its gradients for x, W and b equal
// at::linear's (within float32 summation-order noise) on the oneDNN path and on the BLAS path
// below its size thresholds (each case checks which GEMMs took oneDNN), with a frozen weight, a
// strided input, no bias, in no-grad mode and under bf16 autocast (where it must compute in bf16,
// as at::linear does).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <QTest>

#include "trainer/model/dense.h"

using namespace shardscope;

namespace {

struct Grads {
  at::Tensor y, dx, dw, db;
};

// y = f(x, w, b) and the gradients of sum(y * probe) for the inputs that require them.
template <class F>
Grads run(F f, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0, bool train_w) {
  auto x = x0.detach().requires_grad_(true);
  auto w = w0.detach().requires_grad_(train_w);
  auto b = b0.defined() ? b0.detach().requires_grad_(true) : at::Tensor();
  auto y = f(x, w, b);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto probe = at::randn(y.sizes(), gen, y.options().dtype(at::kFloat));
  (y.to(at::kFloat) * probe).sum().backward();
  return {y.detach(), x.grad(), train_w ? w.grad() : at::Tensor(), b.defined() ? b.grad() : b};
}

at::Tensor reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

// Relative max difference, with a clear message.
void expect_close(const at::Tensor& got, const at::Tensor& want, const char* what) {
  QVERIFY2(got.defined() == want.defined(), what);
  if (!want.defined()) return;
  QCOMPARE(got.sizes().vec(), want.sizes().vec());
  QCOMPARE(got.scalar_type(), want.scalar_type());
  const double scale = want.abs().max().item<double>() + 1e-12;
  const double diff = (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>();
  const double tol = want.scalar_type() == at::kFloat ? 1e-5 : 2e-2;
  QVERIFY2(
      diff / scale <= tol,
      qPrintable(QString("%1: relative difference %2 > %3").arg(what).arg(diff / scale).arg(tol)));
}

// dense() against at::linear; `onednn` is how many of its GEMMs (forward, dx, dW) must have run
// through oneDNN, so a case cannot pass by silently taking the other path.
void expect_same_as_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                           bool train_w, std::int64_t onednn) {
  const auto before = model::onednn_dense_gemms();
  const auto got =
      run([](auto& a, auto& c, auto& d) { return model::dense(a, c, d); }, x, w, b, train_w);
  QCOMPARE(model::onednn_dense_gemms() - before, onednn);
  const auto want = run(reference, x, w, b, train_w);
  expect_close(got.y, want.y, "y");
  expect_close(got.dx, want.dx, "dx");
  expect_close(got.dw, want.dw, "dW");
  expect_close(got.db, want.db, "db");
}

at::Tensor randn(at::IntArrayRef shape, std::uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen);
}

}  // namespace

class TestDense : public QObject {
  Q_OBJECT

 private slots:
  // The test machines' LibTorch has the oneDNN operator: without it every case below would test
  // at::linear against itself.
  void onednnPathIsPresent() { QVERIFY(model::onednn_dense_enabled()); }

  // 3 x 70 rows, 96 -> 130: forward and dx through oneDNN; dW (whose strided g^T oneDNN would
  // copy first) stays BLAS below 512 input columns.
  void onednnMatchesLinear() {
    expect_same_as_linear(randn({3, 70, 96}, 1), randn({130, 96}, 2), randn({130}, 3), true, 2);
  }
  void onednnWithoutBias() {
    expect_same_as_linear(randn({210, 96}, 1), randn({130, 96}, 2), at::Tensor(), true, 2);
  }
  // 520 input columns: dW through oneDNN too.
  void onednnWeightGradient() {
    expect_same_as_linear(randn({2, 60, 520}, 18), randn({64, 520}, 19), randn({64}, 20), true, 3);
  }
  // LoRA's frozen base: no dW (none asked for), dx still right.
  void frozenWeight() {
    expect_same_as_linear(randn({3, 70, 96}, 4), randn({130, 96}, 5), randn({130}, 6), false, 2);
  }
  // A transposed (non-contiguous) input, as attention's output before its reshape can be: oneDNN
  // would copy it first, so below 512 output columns the forward stays BLAS; dx runs on oneDNN.
  void stridedInput() {
    expect_same_as_linear(randn({96, 210}, 7).t(), randn({130, 96}, 8), randn({130}, 9), true, 1);
  }
  // 2 rows (a generation step): below the threshold, every GEMM at::linear's.
  void smallStaysBlas() {
    expect_same_as_linear(randn({2, 16}, 10), randn({8, 16}, 11), randn({8}, 12), true, 0);
  }

  void noGradValues() {
    const at::NoGradGuard no_grad;
    const auto x = randn({4, 50, 64}, 13);
    const auto w = randn({200, 64}, 14);
    const auto before = model::onednn_dense_gemms();
    expect_close(model::dense(x, w), at::linear(x, w), "no-grad y");
    QCOMPARE(model::onednn_dense_gemms() - before, std::int64_t{1});
  }

  // Under CPU bf16 autocast at::linear computes in bf16; dense must too (not float32).
  void autocastComputesInBf16() {
    const bool was = at::autocast::is_autocast_enabled(at::kCPU);
    const auto prev = at::autocast::get_autocast_dtype(at::kCPU);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    const auto before = model::onednn_dense_gemms();
    const auto got = run([](auto& a, auto& c, auto& d) { return model::dense(a, c, d); },
                         randn({210, 96}, 15), randn({130, 96}, 16), randn({130}, 17), true);
    const auto onednn = model::onednn_dense_gemms() - before;
    const auto want =
        run(reference, randn({210, 96}, 15), randn({130, 96}, 16), randn({130}, 17), true);
    at::autocast::set_autocast_enabled(at::kCPU, was);
    at::autocast::set_autocast_dtype(at::kCPU, prev);
    at::autocast::clear_cache();
    QCOMPARE(onednn, std::int64_t{0});
    QCOMPARE(got.y.scalar_type(), at::kBFloat16);
    expect_close(got.y, want.y, "autocast y");
    expect_close(got.dw, want.dw, "autocast dW");
  }
};

QTEST_GUILESS_MAIN(TestDense)
#include "tst_dense.moc"
