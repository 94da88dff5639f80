// Memory panel: QCustomPlot stacked bars from spec::estimate_memory.
#include "ui/builder/memorychart.h"

#include <qcustomplot.h>

#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLoggingCategory>
#include <QSignalBlocker>
#include <QThread>
#include <QVBoxLayout>
#include <algorithm>
#include <string>
#include <utility>

#include "backend/databound.h"
#include "backend/ssh/hostcheck.h"
#include "data/inspect.h"
#include "spec/estimate.h"

Q_LOGGING_CATEGORY(lcMemoryChart, "shardscope.ui.builder.memory")

namespace shardscope::ui {
namespace {

constexpr int kMaxBars = 16;  // more ranks share one shape: the first 16 are drawn
constexpr double kDefaultBudgetGiB = 24.0;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kOffScale = 20.0;  // a budget this many times the stack is not drawn to scale
constexpr int kLabelPad = 2;        // pixels above and below the budget's label

const char* const kNames[] = {"params",
                              "grads",
                              "optimizer",
                              "gathered",
                              "activations (text + vision)",
                              "logits, grad buffers, MFU probe"};
const QColor kColors[] = {QColor(0x4c, 0x72, 0xb0), QColor(0x55, 0xa8, 0x68),
                          QColor(0xdd, 0x84, 0x52), QColor(0x81, 0x72, 0xb3),
                          QColor(0x93, 0x78, 0x60), QColor(0x8c, 0x8c, 0x8c)};
const QColor kOverColors[] = {QColor(0x9b, 0x1c, 0x1c), QColor(0xb9, 0x2b, 0x27),
                              QColor(0xd3, 0x3f, 0x3a), QColor(0xe5, 0x5a, 0x55),
                              QColor(0xef, 0x7f, 0x7a), QColor(0xf5, 0xa3, 0xa0)};

// The unit the axis counts in, so tick labels stay short.
std::pair<double, QString> axisUnit(double bytes) {
  if (bytes >= kGiB) return {kGiB, QStringLiteral("GiB")};
  if (bytes >= 1024.0 * 1024.0) return {1024.0 * 1024.0, QStringLiteral("MiB")};
  if (bytes >= 1024.0) return {1024.0, QStringLiteral("KiB")};
  return {1.0, QStringLiteral("B")};
}

// The fields the data's bound depends on (data::bound_key); empty: not chat data, whose rows are
// data.seq_len's. The file's size and modification time are the worker's to check.
QString boundKey(const spec::Experiment& exp) {
  return QString::fromStdString(data::bound_key(exp));
}

}  // namespace

QString formatBytes(double bytes) {
  const auto [scale, unit] = axisUnit(bytes);
  const double v = bytes / scale;
  return QString::number(v, 'f', v >= 100 ? 0 : (v >= 10 ? 1 : 2)) + QLatin1Char(' ') + unit;
}

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent) {
  m_plot = new QCustomPlot(this);
  m_plot->setMinimumHeight(140);
  m_plot->legend->setVisible(true);
  m_plot->legend->setFont(QFont(font().family(), 8));
  // The legend gets its own row under the chart, three entries a line: inside the chart it
  // covered the budget line's label (the demo's screenshot showed "GiB (far above the bars)").
  m_plot->axisRect()->insetLayout()->take(m_plot->legend);
  m_plot->plotLayout()->addElement(1, 0, m_plot->legend);
  m_plot->plotLayout()->setRowStretchFactor(1, 0.001);
  m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
  m_plot->legend->setWrap(3);
  m_plot->legend->setMargins(QMargins(4, 2, 4, 2));
  QCPBars* below = nullptr;
  for (int c = 0; c < CategoryCount; ++c) {
    auto* bars = new QCPBars(m_plot->xAxis, m_plot->yAxis);
    bars->setName(QString::fromLatin1(kNames[c]));
    bars->setWidth(0.6);
    bars->setStackingGap(0);
    if (below) bars->moveAbove(below);
    below = bars;
    m_bars[static_cast<std::size_t>(c)] = bars;
  }
  m_budgetLine = new QCPItemStraightLine(m_plot);
  m_budgetLine->setPen(QPen(Qt::red, 2, Qt::DashLine));
  // The budget's label hangs from the chart's top right corner, inside it, and replot() keeps
  // the bars and the line below it. Bottom-aligned 8% down, it stood above the data area of the
  // Builder's few hundred pixels and was clipped to its lower half.
  m_budgetLabel = new QCPItemText(m_plot);
  m_budgetLabel->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
  m_budgetLabel->position->setType(QCPItemPosition::ptAxisRectRatio);
  m_budgetLabel->position->setCoords(0.99, 0);
  m_budgetLabel->setPadding(QMargins(0, kLabelPad, 0, 0));
  m_budgetLabel->setColor(Qt::red);
  // The calibrated peak (runs of this kind measured more, or less, than the bars' formulas): a
  // dark dotted line across the bars, labelled at its left end.
  m_calibratedLine = new QCPItemStraightLine(m_plot);
  m_calibratedLine->setPen(QPen(QColor(0x30, 0x30, 0x30), 2, Qt::DotLine));
  m_calibratedLine->setVisible(false);
  m_calibratedLabel = new QCPItemText(m_plot);
  m_calibratedLabel->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
  m_calibratedLabel->setVisible(false);
  connect(m_plot, &QCustomPlot::afterLayout, this, &MemoryChart::fitRange);

  m_budget = new QDoubleSpinBox(this);
  m_budget->setRange(0.001, 4096);
  m_budget->setDecimals(3);
  m_budget->setSuffix(QStringLiteral(" GiB"));
  m_budget->setValue(kDefaultBudgetGiB);
  m_budget->setToolTip(tr("Memory of one device (GPU, or the host for CPU ranks); the red line"));
  m_status = new QLabel(this);
  m_status->setWordWrap(true);
  m_budgetSource = new QLabel(tr("entered here"), this);
  m_budgetSource->setWordWrap(true);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Device budget"), this));
  row->addWidget(m_budget);
  row->addWidget(m_budgetSource, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(row);
  layout->addWidget(m_plot, 1);
  layout->addWidget(m_status);
  connect(m_budget, &QDoubleSpinBox::valueChanged, this, [this] { replot(); });
}

MemoryChart::~MemoryChart() {
  // The worker's answer is queued to this object: stop it at its next line and wait, so none
  // outlives it.
  if (m_boundThread != nullptr) {
    m_boundStop->store(true);
    m_boundThread->wait();
    delete m_boundThread;
  }
}

// The top of the y axis: the highest bar or line ends below the budget's label, at the data
// area's height as last laid out (afterLayout calls this again, before each draw).
void MemoryChart::fitRange() {
  const double height = m_plot->axisRect()->rect().height();
  const double label = QFontMetrics(m_budgetLabel->font()).height() + 2 * kLabelPad;
  const double room = height > 2 * label ? height / (height - label) : 2.0;
  const double top = m_highest * std::max(m_headroom, room * 1.05);
  if (top != m_plot->yAxis->range().upper) m_plot->yAxis->setRange(0, top);
}

void MemoryChart::setBudgetGiB(double gib) {
  m_budgetSource->setText(tr("entered here"));
  m_budget->setValue(gib);
}

QString MemoryChart::budgetSource() const { return m_budgetSource->text(); }

// The budget of spec's rules for this experiment: launch.device_memory_gib, this
// machine's GPU or memory for local launches (nvidia-smi once per panel); SSH hosts are not
// contacted from the GUI thread, so without the field their budget is the one entered here.
void MemoryChart::applyBudget(const spec::Experiment& exp) {
  m_budgetError.clear();
  spec::DetectedMemory detected;
  if (exp.launch.kind == spec::LaunchKind::local && exp.launch.device_memory_gib <= 0) {
    if (!m_local || m_localGpus != exp.launch.gpus) {
      auto found = backend::detectMemory(exp.launch);  // local: never fails
      m_local = found ? *found : spec::DetectedMemory{};
      m_localGpus = exp.launch.gpus;
    }
    detected = *m_local;
  } else if (exp.launch.kind == spec::LaunchKind::ssh && exp.launch.device_memory_gib <= 0) {
    m_budgetSource->setText(
        tr("entered here (set launch.device_memory_gib, or check the host "
           "in the Hosts view)"));
    m_budgetGpu = exp.shard.device != "cpu";
    return;
  }
  auto budget = spec::device_budget(exp, detected);
  if (!budget) {
    m_budgetError = QString::fromStdString(budget.message());
    m_budgetSource->setText(m_budgetError);
    return;
  }
  m_budgetGpu = budget->gpu;
  if (budget->bytes <= 0) return;
  const QSignalBlocker quiet(m_budget);
  m_budget->setValue(static_cast<double>(budget->bytes) / kGiB);
  m_budgetSource->setText(QString::fromStdString(budget->source));
}

double MemoryChart::budgetBytes() const { return m_budget->value() * kGiB; }

void MemoryChart::setCalibrations(const spec::Calibrations& calibrations) {
  if (calibrations == m_calibrations) return;
  m_calibrations = calibrations;
  if (m_shown) setExperiment(spec::Experiment(*m_shown));
}

std::int64_t MemoryChart::peakBytes() const {
  return spec::calibrated_bytes(stackBytes(0), m_calibration);
}

void MemoryChart::setExperiment(const spec::Experiment& exp) {
  m_shown = exp;
  applyBudget(exp);
  // Chat data: the worker reads the file, or finds it unchanged since it last did (its size and
  // modification time); meanwhile the bound it last read for the same fields stands.
  if (!boundKey(exp).isEmpty()) requestBound(exp);
  estimate();
}

void MemoryChart::requestBound(const spec::Experiment& exp) {
  const QString key = boundKey(exp);
  if (m_boundThread != nullptr) {  // one read at a time: the newest request waits
    // A read of other fields' data (another file, data.seq_len) is no longer wanted: it stops at
    // its next line, unrecorded.
    if (key != m_boundJob) m_boundStop->store(true);
    m_boundNext = exp;
    return;
  }
  m_boundJob = key;
  m_boundStop = std::make_shared<std::atomic<bool>>(false);
  const std::shared_ptr<std::atomic<bool>> stop = m_boundStop;
  m_boundThread = QThread::create([this, exp, key, stop] {
    auto bound = backend::trainDataBound(exp, stop.get());
    if (stop->load()) return;  // stopped: its answer may be a partial read
    std::optional<spec::DataBound> value;
    QString error;
    if (bound) {
      value = *bound;
    } else {
      error = QString::fromStdString(bound.message());
    }
    QMetaObject::invokeMethod(
        this, [this, key, value, error] { boundRead(key, value, error); }, Qt::QueuedConnection);
  });
  connect(m_boundThread, &QThread::finished, this, [this] {
    m_boundThread->wait();
    m_boundThread->deleteLater();
    m_boundThread = nullptr;
    if (m_boundNext) {
      spec::Experiment next = std::move(*m_boundNext);
      m_boundNext.reset();
      requestBound(next);
      return;
    }
    emit dataBoundRead();
  });
  m_boundThread->start(QThread::LowPriority);
}

void MemoryChart::boundRead(const QString& key, const std::optional<spec::DataBound>& bound,
                            const QString& error) {
  const auto known = m_bounds.find(key);
  const bool same =
      known != m_bounds.end() && known->second.error == error && known->second.bound == bound;
  m_bounds[key] = KnownBound{bound, error};
  qCDebug(lcMemoryChart) << "data bound of" << key << (bound ? bound->longest : -1) << error;
  if (!same && m_shown && boundKey(*m_shown) == key) estimate();
}

void MemoryChart::estimate() {
  const spec::Experiment& exp = *m_shown;
  m_calibration = {};
  m_perRank.fill(0);
  m_ranks = 0;
  m_nf4 = 0;
  m_nf4Packed = 0;
  m_error.clear();
  const int world = spec::launch_world_size(exp.launch);
  // The rows: the data's longest sample when the worker has read it, else data.seq_len's.
  const QString key = boundKey(exp);
  std::optional<KnownBound> known;
  if (const auto it = m_bounds.find(key); !key.isEmpty() && it != m_bounds.end())
    known = it->second;
  m_rows.reset();
  if (known) m_rows = known->bound;
  auto est =
      spec::estimate_memory(exp, world, exp.launch.nproc_per_node, m_rows ? &*m_rows : nullptr);
  const QString seqLen = tr("rows bounded by data.seq_len = %1").arg(exp.data.seq_len);
  if (key.isEmpty()) {
    m_rowsText =
        seqLen + tr(" (data.format = \"%1\")").arg(QString::fromStdString(exp.data.format));
  } else if (!known) {
    m_rowsText = seqLen + tr(" until data.train_path is read");
  } else if (!known->error.isEmpty()) {
    m_rowsText = seqLen + tr(": the data could not be read: %1").arg(known->error);
  } else if (est && est->rows_from != "data.seq_len") {
    // Packed, a row is data.seq_len tokens; the data bounds the image samples a row holds.
    m_rowsText = exp.data.pack
                     ? tr("packed rows of data.seq_len = %1, their samples bounded by "
                          "the data: longest %2 tokens")
                           .arg(exp.data.seq_len)
                           .arg(m_rows->longest)
                     : tr("rows bounded by the data: longest %1 tokens").arg(m_rows->longest);
    m_rowsText += tr(" (%1 samples of %2)")
                      .arg(m_rows->samples)
                      .arg(QFileInfo(QString::fromStdString(exp.data.train_path)).fileName());
  } else {
    m_rowsText = seqLen + tr(": no sample of data.train_path loads");
  }
  if (!est) {
    m_error = QString::fromStdString(est.message());
    qCDebug(lcMemoryChart) << "no estimate:" << m_error;
  } else {
    const auto& e = *est;
    m_ranks = e.world_size;
    m_nf4 = e.nf4;
    m_nf4Packed = e.nf4_packed;
    // What completed runs of this kind measured corrects the peak (the bars keep the formulas'
    // terms; the status states the corrected peak and the budget holds it).
    m_calibration = spec::find_calibration(m_calibrations, exp, e, m_budgetGpu);
    m_budgeted = spec::budgeted_bytes(spec::calibrated(e, m_calibration),
                                      spec::DeviceBudget{0, {}, m_budgetGpu});
    // estimate_memory's total is a peak: params + optimizer + the largest of its moments
    // (spec/estimate.h, peak_moment). The bars show the moment that makes the peak, so each
    // stack equals the estimate's total: at the end of backward the sharded grads, the root
    // still gathered and the grad buffers; else the gathered units (at most what the peak
    // leaves beside the activations: the head's forward holds the root alone), the activations
    // and the rest (logits, gradients in flight, the MFU probe).
    const std::int64_t peak = e.total - e.params - e.optimizer;
    const std::int64_t activations = e.activations + e.vision;
    // A moment with units gathered and activations saved (not the end of backward, not rank 0's
    // probe before training).
    const bool head = e.peak_moment != "backward_end" && e.peak_moment != "probe";
    m_headMoment = head;
    m_moment = QString::fromStdString(e.peak_moment);
    if (e.peak_moment == "probe") {
      // Before training: the state beside rank 0's GEMM, no unit gathered, nothing saved.
      m_perRank = {e.params, 0, e.optimizer, 0, 0, peak};
    } else if (head) {
      const std::int64_t gathered =
          std::min(e.gathered, std::max<std::int64_t>(0, peak - activations));
      m_perRank = {e.params, 0, e.optimizer, gathered, activations, peak - gathered - activations};
    } else {
      m_perRank = {e.params, e.grads,       e.optimizer, peak - e.grads - e.grad_buffers,
                   0,        e.grad_buffers};
    }
  }
  replot();
}

std::int64_t MemoryChart::barBytes(Category c, int rank) const {
  if (rank < 0 || rank >= std::min(m_ranks, kMaxBars)) return 0;
  return m_perRank[static_cast<std::size_t>(c)];
}

std::int64_t MemoryChart::stackBytes(int rank) const {
  std::int64_t total = 0;
  for (int c = 0; c < CategoryCount; ++c) total += barBytes(static_cast<Category>(c), rank);
  return total;
}

std::int64_t MemoryChart::budgetedBytes() const {
  return m_ranks > 0 ? std::min(m_budgeted, peakBytes()) : 0;
}

bool MemoryChart::overBudget() const {
  return m_ranks > 0 && static_cast<double>(budgetedBytes()) > budgetBytes();
}

QString MemoryChart::statusText() const { return m_status->text(); }

QString MemoryChart::statusToolTip() const { return m_status->toolTip(); }

void MemoryChart::replot() {
  const int shown = std::min(m_ranks, kMaxBars);
  const double total = static_cast<double>(peakBytes());
  const double budget = budgetBytes();
  const bool toScale = total > 0 && budget < total * kOffScale;
  const auto [scale, unit] = axisUnit(toScale ? std::max(total, budget) : total);
  const bool over = overBudget();
  QVector<double> keys;
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int r = 0; r < shown; ++r) {
    keys.append(r);
    ticker->addTick(r, QStringLiteral("rank %1").arg(r));
  }
  for (int c = 0; c < CategoryCount; ++c) {
    QVector<double> values(shown,
                           static_cast<double>(m_perRank[static_cast<std::size_t>(c)]) / scale);
    auto* bars = m_bars[static_cast<std::size_t>(c)];
    bars->setData(keys, values, true);
    const QColor color = over ? kOverColors[c] : kColors[c];
    bars->setBrush(color);
    bars->setPen(QPen(color.darker(130)));
  }
  // QLoRA: the params bar holds the NF4 base's shards, and its legend entry says so.
  m_bars[Params]->setName(m_nf4Packed > 0 ? tr("params (NF4 base %1)").arg(formatBytes(m_nf4))
                                          : QString::fromLatin1(kNames[Params]));
  m_plot->xAxis->setTicker(ticker);
  m_plot->xAxis->setRange(-0.7, std::max(shown, 1) - 0.3);
  // The unit alone: "bytes per rank (MiB)" was longer than the axis is high in the Builder, and
  // drew cut ("bytes per rank (M"); the tab says "Memory per rank".
  m_plot->yAxis->setLabel(unit);
  // The bars keep the formulas' terms: a correction below 1 states a peak under their top.
  const double top = std::max(total, static_cast<double>(stackBytes(0)));
  m_highest = (toScale ? std::max(top, budget) : std::max(top, 1.0)) / scale;
  m_headroom = toScale ? 1.15 : 1.3;
  fitRange();
  const bool calibrated = m_calibration.runs > 0 && shown > 0;
  m_calibratedLine->setVisible(calibrated);
  m_calibratedLabel->setVisible(calibrated);
  if (calibrated) {
    m_calibratedLine->point1->setCoords(-1, total / scale);
    m_calibratedLine->point2->setCoords(1, total / scale);
    m_calibratedLabel->position->setCoords(-0.65, total / scale);
    m_calibratedLabel->setText(
        tr("peak %1, %2")
            .arg(formatBytes(total),
                 QString::fromStdString(spec::format_calibration(m_calibration))));
  }
  m_budgetLine->setVisible(toScale);
  m_budgetLine->point1->setCoords(-1, budget / scale);
  m_budgetLine->point2->setCoords(1, budget / scale);
  m_budgetLabel->setText(toScale ? tr("budget %1").arg(formatBytes(budget))
                                 : tr("budget %1 (far above the bars)").arg(formatBytes(budget)));
  QString text;
  QString tip;
  if (!m_error.isEmpty()) {
    // The first reason only, with a count: a word-wrapped list of every error raised the
    // builder's minimum height with each one, and the main window grew past the screen. The
    // form marks every field; the tooltip has the whole list.
    const QStringList reasons = m_error.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    text = tr("No estimate: %1").arg(reasons.value(0));
    if (reasons.size() > 1)
      text += tr(" (and %n more: hover for all)", nullptr, int(reasons.size()) - 1);
    tip = m_error;
  } else if (!m_budgetError.isEmpty()) {
    text = tr("No budget: %1").arg(m_budgetError);
  } else {
    text = tr("Peak %1 per rank on %2 ranks, at %6 (%3 of the %4 budget)%5")
               .arg(formatBytes(total))
               .arg(m_ranks)
               .arg(QString::number(100.0 * total / budget, 'f', total / budget < 0.01 ? 4 : 1) +
                    QLatin1Char('%'))
               .arg(formatBytes(budget))
               .arg(over ? tr(": OVER BUDGET") : QString())
               .arg(m_moment == QLatin1String("head_forward")   ? tr("the head's forward")
                    : m_moment == QLatin1String("backward_end") ? tr("the end of backward")
                    : m_moment == QLatin1String("probe")        ? tr("rank 0's MFU probe")
                                                                : tr("a block's backward"));
    if (m_calibration.runs > 0)
      text += tr("; %1 (the formulas give %2)")
                  .arg(QString::fromStdString(spec::format_calibration(m_calibration)),
                       formatBytes(double(stackBytes(0))));
    if (m_nf4Packed > 0)
      text += tr("; base in NF4: %1 packed, %2 per rank")
                  .arg(formatBytes(m_nf4Packed), formatBytes(m_nf4));
    text += QStringLiteral("; ") + m_rowsText;
  }
  m_status->setText(text);
  m_status->setToolTip(tip);
  m_status->setStyleSheet(over || !m_error.isEmpty() || !m_budgetError.isEmpty()
                              ? QStringLiteral("color: #b92b27;")
                              : QString());
  m_plot->replot();
}

}  // namespace shardscope::ui
