// The loss path of the Qwen2 text stack: the head's fused linear cross-entropy against the plain
// formula (lm_head logits, fp32 log-softmax, summed NLL and their backward) in fp32 and bf16,
// its evaluation tally, its chunk-size rule and its memory (no tokens x vocabulary tensor); and
// right-padded batches attending with the causal kernel alone (no mask tensor), with the loss
// of a padded batch equal to its samples' losses one by one.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <QTest>

#include <stdexcept>

#include "spec/estimate.h"
#include "spec/model_shape.h"
#include "trainer/model/qwen2.h"
#include "trainer/model/text_layers.h"
#include "trainer/run/memory.h"

using namespace shardscope;

namespace {

constexpr std::int64_t kVocab = 97;
constexpr std::int64_t kHidden = 16;

spec::Qwen2Dims dims(std::int64_t vocab = kVocab) {
  spec::Qwen2Dims d;
  d.vocab_size = vocab;
  d.hidden_size = kHidden;
  d.intermediate_size = 24;
  d.num_layers = 2;
  d.num_heads = 4;
  d.num_kv_heads = 2;
  return d;
}

struct Head {
  at::Tensor x;       // (B, T, C) the last block's output, a leaf
  at::Tensor norm;    // (C)
  at::Tensor weight;  // (V, C) lm_head
  model::Batch batch;
};

// A head of vocabulary `vocab` in `dtype` over (B, T) tokens, a third of the labels -100.
Head head(at::ScalarType dtype, std::int64_t B = 3, std::int64_t T = 11,
          std::int64_t vocab = kVocab) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(5);
  Head h;
  h.x = at::randn({B, T, kHidden}, g).to(dtype).requires_grad_();
  h.norm = (1 + 0.1 * at::randn({kHidden}, g)).to(dtype).requires_grad_();
  h.weight = (0.3 * at::randn({vocab, kHidden}, g)).to(dtype).requires_grad_();
  h.batch.input_ids = at::randint(0, vocab, {B, T}, g, at::kLong);
  h.batch.labels = at::randint(0, vocab, {B, T}, g, at::kLong);
  h.batch.labels.masked_fill_(at::rand({B, T}, g) < 0.33, -100);
  return h;
}

model::LayerContext context(const model::Batch& batch, std::int64_t chunk, double scale) {
  model::LayerContext ctx;
  ctx.batch = &batch;
  ctx.loss_scale = scale;
  ctx.loss_chunk_tokens = chunk;
  return ctx;
}

// The plain path: every position's logits in fp32, log-softmax, summed NLL (what the head did
// before it was fused, and what transformers computes).
at::Tensor plain_loss(const Head& h, double scale) {
  const auto T = h.x.size(1);
  auto hidden = model::rms_norm(h.x.narrow(1, 0, T - 1), h.norm, 1e-6);
  auto logits = at::matmul(hidden, h.weight.t()).to(at::kFloat);  // (B, T-1, V)
  auto labels = h.batch.labels.narrow(1, 1, T - 1).reshape({-1});
  return at::nll_loss(at::log_softmax(logits.reshape({-1, logits.size(-1)}), -1), labels, {},
                      at::Reduction::Sum, -100) *
         scale;
}

struct Grads {
  double loss = 0;
  at::Tensor x, norm, weight;
};

Grads grads_of(Head& h, const at::Tensor& loss) {
  for (auto* t : {&h.x, &h.norm, &h.weight}) t->mutable_grad() = at::Tensor();
  loss.backward();
  return {loss.item<double>(), h.x.grad().to(at::kFloat), h.norm.grad().to(at::kFloat),
          h.weight.grad().to(at::kFloat)};
}

double max_rel(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace

class TestHeadLoss : public QObject {
  Q_OBJECT

 private slots:
  void fusedEqualsPlainInFp32_data() {
    QTest::addColumn<qint64>("chunk");
    QTest::newRow("one row a chunk") << qint64{1};
    QTest::newRow("3 rows, a short last chunk") << qint64{3};
    QTest::newRow("chosen") << qint64{0};
    QTest::newRow("all rows at once") << qint64{1000};
  }
  void fusedEqualsPlainInFp32() {
    QFETCH(qint64, chunk);
    auto h = head(at::kFloat);
    const double scale = 1.0 / 17;
    auto ref = grads_of(h, plain_loss(h, scale));
    auto ctx = context(h.batch, chunk, scale);
    auto got = grads_of(h, model::qwen2_loss(dims(), {h.norm, h.weight}, h.x, ctx));
    QVERIFY2(std::abs(got.loss - ref.loss) <= 1e-6 * std::abs(ref.loss),
             qPrintable(QStringLiteral("loss %1 vs plain %2").arg(got.loss).arg(ref.loss)));
    QVERIFY2(max_rel(got.x, ref.x) <= 1e-6, qPrintable(QString::number(max_rel(got.x, ref.x))));
    QVERIFY2(max_rel(got.norm, ref.norm) <= 1e-6,
             qPrintable(QString::number(max_rel(got.norm, ref.norm))));
    QVERIFY2(max_rel(got.weight, ref.weight) <= 1e-6,
             qPrintable(QString::number(max_rel(got.weight, ref.weight))));
    // Positions without a label (and the last, which predicts nothing) get no gradient.
    const auto T = h.x.size(1);
    auto unlabeled =
        at::cat({h.batch.labels.narrow(1, 1, T - 1) == -100, at::ones({h.x.size(0), 1}, at::kBool)},
                1);  // (B, T)
    QCOMPARE(got.x.index({unlabeled}).abs().max().item<double>(), 0.0);
  }

  void fusedEqualsPlainInBf16() {
    auto h = head(at::kBFloat16);
    auto ref = grads_of(h, plain_loss(h, 0.25));
    auto ctx = context(h.batch, 4, 0.25);
    auto got = grads_of(h, model::qwen2_loss(dims(), {h.norm, h.weight}, h.x, ctx));
    // The same bf16 logits and GEMM inputs; the weight gradient's row sums are added per chunk
    // in fp32 and rounded once (the plain GEMM rounds its own fp32 sum once).
    QVERIFY2(std::abs(got.loss - ref.loss) <= 1e-5 * std::abs(ref.loss),
             qPrintable(QStringLiteral("loss %1 vs %2").arg(got.loss).arg(ref.loss)));
    QVERIFY2(max_rel(got.x, ref.x) <= 1e-2, qPrintable(QString::number(max_rel(got.x, ref.x))));
    QVERIFY2(max_rel(got.weight, ref.weight) <= 2e-2,
             qPrintable(QString::number(max_rel(got.weight, ref.weight))));
  }

  void evaluationTalliesTheArgmaxWithoutGradients() {
    auto h = head(at::kFloat);
    const auto T = h.x.size(1);
    auto labels = h.batch.labels.narrow(1, 1, T - 1);  // a view: edits reach the batch
    auto logits = at::matmul(model::rms_norm(h.x.narrow(1, 0, T - 1), h.norm, 1e-6),
                             h.weight.t())
                      .detach();  // (B, T-1, V)
    // Every other position's label is its argmax: hits to count.
    auto every_other = (at::arange(labels.numel()) % 2 == 0).view(labels.sizes());
    labels.copy_(at::where(every_other & (labels != -100), logits.argmax(-1), labels));
    model::TokenTally tally;
    h.batch.tally = &tally;
    at::Tensor loss;
    {
      at::NoGradGuard no_grad;
      auto ctx = context(h.batch, 2, 1.0);
      loss = model::qwen2_loss(dims(), {h.norm, h.weight}, h.x, ctx);
    }
    QVERIFY(!loss.requires_grad());
    QVERIFY(std::abs(loss.item<double>() - plain_loss(h, 1.0).item<double>()) <=
            1e-6 * loss.item<double>());
    auto counted = labels != -100;
    QCOMPARE(tally.total, counted.sum().item<std::int64_t>());
    QCOMPARE(tally.correct, (counted & (logits.argmax(-1) == labels)).sum().item<std::int64_t>());
    QVERIFY(tally.correct > 0 && tally.correct < tally.total);
  }

  // A vocabulary of 20,000 over 2 x 65 tokens: the plain path's fp32 logits alone are 10.4 MB
  // (and it keeps two more copies); the fused path holds one chunk's and lm_head's gradient.
  void noTokensByVocabularyTensor() {
    trainer::install_counting_allocator();
    constexpr std::int64_t kBig = 20000;
    auto h = head(at::kFloat, 2, 65, kBig);
    h.batch.labels.fill_(7);
    const auto rows = 2 * 64;
    const auto full_logits = rows * kBig * 4;
    auto ctx = context(h.batch, 8, 1.0);
    trainer::reset_peak_memory();
    const auto before = trainer::memory_stats().allocated;
    grads_of(h, model::qwen2_loss(dims(kBig), {h.norm, h.weight}, h.x, ctx));
    const auto peak = trainer::memory_stats().peak - before;
    // One chunk: 8 x V x (4 + 4 + 4) bytes; the weight's gradient in fp32 twice (accumulated and
    // returned): 2 x V x C x 4; the rest is (rows x C).
    const auto bound = 8 * kBig * 12 + 2 * kBig * kHidden * 4 + 16 * rows * kHidden * 4;
    QVERIFY2(peak <= bound && bound < full_logits,
             qPrintable(QStringLiteral("peak %1 B, bound %2 B, full logits %3 B")
                            .arg(peak)
                            .arg(bound)
                            .arg(full_logits)));
  }

  void chunkRule() {
    // Qwen2-1.5B's head at 8 x 4096 tokens: about rows x hidden / vocab (331), to 512.
    QCOMPARE(spec::loss_chunk_rows(8 * 4095, 151936, 1536, 0), std::int64_t{512});
    // A small vocabulary: at least 2^24 logits a chunk (2048 rows of 8192), and Qwen2's
    // vocabulary under a narrow stack: 111 rows, to 128.
    QCOMPARE(spec::loss_chunk_rows(4096, 8192, 64, 0), std::int64_t{2048});
    QCOMPARE(spec::loss_chunk_rows(1020, 151936, 256, 0), std::int64_t{128});
    QCOMPARE(spec::loss_chunk_rows(50, 8192, 64, 0), std::int64_t{50});  // never above the rows
    QCOMPARE(spec::loss_chunk_rows(0, 8192, 64, 0), std::int64_t{1});    // nothing to compute
    QCOMPARE(spec::loss_chunk_rows(5000, 151936, 1536, 300), std::int64_t{300});  // as asked
    // 1 GiB free: one chunk within 64 MiB, 10 bytes a logit: 44 rows of 151936.
    QCOMPARE(spec::loss_chunk_rows(8 * 4095, 151936, 1536, 0, std::int64_t{1} << 30),
             std::int64_t{44});
  }

  void rightPaddedBatchesNeedNoMask() {
    model::Qwen2Model m(dims());
    std::vector<std::vector<at::Tensor>> params;
    for (std::size_t l = 0; l < m.layers().size(); ++l) {
      std::vector<at::Tensor> v;
      for (const auto& p : m.layers()[l].params) v.push_back(at::zeros(p.shape, at::kFloat));
      m.init_layer(static_cast<int>(l), v, 3);
      params.push_back(std::move(v));
    }
    auto loss_of = [&](const model::Batch& b) {
      auto ctx = m.context(b, at::kFloat);
      [&] { QVERIFY2(!ctx.attn_mask.defined(), "a loss batch has no attention mask tensor"); }();
      at::Tensor x;
      const auto n = static_cast<int>(params.size());
      for (int l = 0; l < n; ++l)
        x = m.forward_layer(l, params[static_cast<std::size_t>(l)], x, ctx);
      return x.item<double>();
    };
    auto g = at::make_generator<at::CPUGeneratorImpl>(9);
    const std::int64_t lengths[] = {9, 5, 2};
    model::Batch padded;
    padded.input_ids = at::zeros({3, 9}, at::kLong);
    padded.labels = at::full({3, 9}, -100, at::kLong);
    padded.attention_mask = at::zeros({3, 9}, at::kLong);
    double one_by_one = 0;
    for (std::int64_t b = 0; b < 3; ++b) {
      const auto n = lengths[b];
      auto ids = at::randint(0, kVocab, {1, n}, g, at::kLong);
      model::Batch alone;
      alone.input_ids = ids;
      alone.labels = ids.clone();
      one_by_one += loss_of(alone);
      padded.input_ids[b].narrow(0, 0, n).copy_(ids[0]);
      padded.labels[b].narrow(0, 0, n).copy_(ids[0]);
      padded.attention_mask[b].narrow(0, 0, n).fill_(1);
    }
    const auto together = loss_of(padded);
    QVERIFY2(std::abs(together - one_by_one) <= 1e-5 * std::abs(one_by_one),
             qPrintable(QStringLiteral("padded %1, one by one %2").arg(together).arg(one_by_one)));

    // Left padding reaches no loss path: refused, naming the rule.
    model::Batch left = padded;
    left.attention_mask = padded.attention_mask.flip(1);
    try {
      (void)m.context(left, at::kFloat);
      QFAIL("a left-padded loss batch was accepted");
    } catch (const std::exception& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String("not right-padded")), e.what());
    }
  }
};

QTEST_APPLESS_MAIN(TestHeadLoss)
#include "tst_head_loss.moc"
