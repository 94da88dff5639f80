// The builder's Inspect data tab, on data/inspect.h (no LibTorch); the jobs run on a QThread.
#include "ui/builder/inspectpanel.h"

#include <qcustomplot.h>

#include <QComboBox>
#include <QHBoxLayout>
#include <QHash>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBrowser>
#include <QThread>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>

#include "data/image/image.h"

namespace shardscope::ui {
namespace {

constexpr int kThumbSize = 64;  // pixels, longest side
const char* const kLossStyle = "background-color:#ffe08a;";

QString escaped(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

// Text with its line breaks kept in HTML.
QString htmlText(const std::string& s) {
  return escaped(s).replace(QLatin1Char('\n'), QStringLiteral("<br>"));
}

QString percent(double v) { return QString::number(100.0 * v, 'f', 1) + QLatin1Char('%'); }

QTableWidgetItem* item(const QString& text) {
  auto* it = new QTableWidgetItem(text);
  it->setFlags(it->flags() & ~Qt::ItemIsEditable);
  return it;
}

}  // namespace

// A text browser whose images are thumbnails held in memory (setHtml clears a document's own
// resources, so they are served from here).
class SampleBrowser : public QTextBrowser {
 public:
  using QTextBrowser::QTextBrowser;
  QHash<QString, QImage> images;
  QVariant loadResource(int type, const QUrl& name) override {
    if (type == QTextDocument::ImageResource && images.contains(name.toString()))
      return images.value(name.toString());
    return QTextBrowser::loadResource(type, name);
  }
};

InspectPanel::InspectPanel(QWidget* parent) : QWidget(parent) {
  m_inspect = new QPushButton(tr("Inspect data"), this);
  m_inspect->setToolTip(
      tr("Read data.train_path and data.eval_path with the trainer's tokenizer, chat template "
         "and image processor"));
  m_cancel = new QPushButton(tr("Cancel"), this);
  m_cancel->setEnabled(false);
  m_progress = new QProgressBar(this);
  m_progress->setRange(0, 1000);
  m_progress->setValue(0);
  m_status = new QLabel(tr("Press Inspect data to read the data as the trainer will."), this);
  m_status->setWordWrap(true);
  m_figures = new QLabel(this);
  m_figures->setWordWrap(true);
  m_figures->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_histFile = new QComboBox(this);
  m_plot = new QCustomPlot(this);
  m_plot->setMinimumHeight(140);
  m_plot->xAxis->setLabel(tr("tokens per sample (images expanded)"));
  m_plot->yAxis->setLabel(tr("samples"));
  m_lines = new QTableWidget(0, 4, this);
  m_lines->setHorizontalHeaderLabels({tr("file"), tr("line"), tr("kind"), tr("reason")});
  m_lines->horizontalHeader()->setStretchLastSection(true);
  m_lines->verticalHeader()->hide();
  m_lines->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_images = new QTableWidget(0, 4, this);
  m_images->setHorizontalHeaderLabels(
      {tr("line"), tr("grid t x h x w"), tr("tokens"), tr("image")});
  m_images->horizontalHeader()->setStretchLastSection(true);
  m_images->verticalHeader()->hide();
  m_sampleFile = new QComboBox(this);
  m_sampleFile->addItems({tr("train"), tr("eval")});
  m_sampleLine = new QSpinBox(this);
  m_sampleLine->setRange(1, 1'000'000'000);
  m_sampleLine->setPrefix(tr("line "));
  m_show = new QPushButton(tr("Show"), this);
  m_sample = new SampleBrowser(this);
  m_sample->setOpenLinks(false);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_inspect);
  buttons->addWidget(m_cancel);
  buttons->addWidget(m_progress, 1);
  auto* histRow = new QHBoxLayout;
  histRow->addWidget(new QLabel(tr("Histogram of"), this));
  histRow->addWidget(m_histFile, 1);
  auto* sampleRow = new QHBoxLayout;
  sampleRow->addWidget(new QLabel(tr("Sample:"), this));
  sampleRow->addWidget(m_sampleFile);
  sampleRow->addWidget(m_sampleLine);
  sampleRow->addWidget(m_show);
  sampleRow->addStretch(1);

  auto* top = new QWidget(this);
  auto* topLayout = new QVBoxLayout(top);
  topLayout->setContentsMargins(0, 0, 0, 0);
  topLayout->addWidget(m_figures);
  topLayout->addLayout(histRow);
  topLayout->addWidget(m_plot, 1);
  auto* bottom = new QWidget(this);
  auto* bottomLayout = new QVBoxLayout(bottom);
  bottomLayout->setContentsMargins(0, 0, 0, 0);
  bottomLayout->addLayout(sampleRow);
  bottomLayout->addWidget(m_sample, 1);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(top);
  split->addWidget(m_lines);
  split->addWidget(m_images);
  split->addWidget(bottom);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  layout->addWidget(m_status);
  layout->addWidget(split, 1);

  connect(m_inspect, &QPushButton::clicked, this, &InspectPanel::inspect);
  connect(m_cancel, &QPushButton::clicked, this, &InspectPanel::cancel);
  connect(m_show, &QPushButton::clicked, this,
          [this] { showLine(m_sampleLine->value(), m_sampleFile->currentIndex() == 1); });
  connect(m_histFile, &QComboBox::currentIndexChanged, this, [this] { drawHistogram(); });
  connect(m_lines, &QTableWidget::cellClicked, this, [this](int row, int) { lineClicked(row); });
}

InspectPanel::~InspectPanel() {
  // The job's callbacks are queued to this object: stop it and wait, so none outlives it.
  if (m_thread != nullptr) {
    m_stop->store(true);
    m_thread->wait();
    delete m_thread;
  }
}

void InspectPanel::setExperiment(const spec::Experiment& exp) { m_exp = exp; }

QString InspectPanel::figuresText() const { return m_figures->text(); }
QString InspectPanel::statusText() const { return m_status->text(); }
QString InspectPanel::sampleText() const { return m_sample->toPlainText(); }

void InspectPanel::cancel() {
  if (m_stop) m_stop->store(true);
}

void InspectPanel::startJob(std::function<void()> job) {
  m_stop = std::make_shared<std::atomic<bool>>(false);
  m_inspect->setEnabled(false);
  m_show->setEnabled(false);
  m_cancel->setEnabled(true);
  m_progress->setValue(0);
  m_thread = QThread::create(std::move(job));
  connect(m_thread, &QThread::finished, this, &InspectPanel::jobDone);
  m_thread->start(QThread::LowPriority);
}

void InspectPanel::jobDone() {
  m_thread->wait();
  m_thread->deleteLater();
  m_thread = nullptr;
  m_inspect->setEnabled(true);
  m_show->setEnabled(true);
  m_cancel->setEnabled(false);
  emit finished();
}

void InspectPanel::inspect() {
  if (m_thread != nullptr) return;
  m_status->setText(tr("Reading the data as the trainer will..."));
  const spec::Experiment exp = m_exp;
  startJob([this, exp] {
    data::InspectOptions options;
    options.cancel = m_stop.get();
    options.progress = [this](std::int64_t bytes, std::int64_t total) {
      QMetaObject::invokeMethod(
          this, [this, bytes, total] { showProgress(bytes, total); }, Qt::QueuedConnection);
    };
    auto inspector = data::DataInspector::open(exp);
    auto result = std::make_shared<Result<data::Inspection>>(
        inspector ? inspector->inspect(options) : Result<data::Inspection>(inspector.error()));
    QMetaObject::invokeMethod(
        this, [this, result] { showInspection(*result); }, Qt::QueuedConnection);
  });
}

void InspectPanel::showLine(std::int64_t line, bool eval) {
  if (m_thread != nullptr) return;
  const std::string path = eval ? m_exp.data.eval_path : m_exp.data.train_path;
  m_sampleFile->setCurrentIndex(eval ? 1 : 0);
  m_sampleLine->setValue(static_cast<int>(std::min<std::int64_t>(line, m_sampleLine->maximum())));
  m_status->setText(tr("Reading line %1 of %2...").arg(line).arg(escaped(path)));
  const spec::Experiment exp = m_exp;
  startJob([this, exp, path, line] {
    auto inspector = data::DataInspector::open(exp);
    auto result = std::make_shared<Result<data::SampleView>>(
        inspector ? inspector->sample(path, line) : Result<data::SampleView>(inspector.error()));
    QMetaObject::invokeMethod(
        this, [this, result] { showSample(*result); }, Qt::QueuedConnection);
  });
}

void InspectPanel::showProgress(qint64 bytes, qint64 total) {
  if (total > 0) m_progress->setValue(static_cast<int>(1000 * bytes / total));
}

void InspectPanel::showInspection(const Result<data::Inspection>& result) {
  if (!result) {
    m_status->setText(tr("Cannot inspect: %1").arg(escaped(result.message())));
    return;
  }
  m_result = *result;
  m_progress->setValue(1000);
  m_status->setText(m_result.cancelled ? tr("Cancelled: the figures cover the lines read so far.")
                                       : tr("format %1, data.seq_len %2, packing %3, model %4")
                                             .arg(escaped(m_result.format))
                                             .arg(m_result.seq_len)
                                             .arg(m_result.packing ? tr("on") : tr("off"),
                                                  escaped(m_result.model)));
  QString html;
  m_lines->setRowCount(0);
  m_images->setRowCount(0);
  m_histFile->blockSignals(true);
  m_histFile->clear();
  for (const auto& f : m_result.files) {
    m_histFile->addItem(QString::fromStdString(f.role));
    html += tr("<p><b>%1</b> (%2): %3 lines, <b>%4 samples</b>, <b>%5 refused</b>, <b>%6 over "
               "data.seq_len</b>; tokens min %7, mean %8, max %9; loss tokens %10")
                .arg(escaped(f.role), escaped(f.path))
                .arg(f.lines)
                .arg(f.samples)
                .arg(f.refused)
                .arg(f.over_seq_len)
                .arg(f.min_tokens)
                .arg(f.mean_tokens, 0, 'f', 1)
                .arg(f.max_tokens)
                .arg(f.loss_tokens);
    if (f.pack_efficiency)
      html += tr("; packing efficiency <b>%1</b> (%2 rank(s))")
                  .arg(percent(*f.pack_efficiency))
                  .arg(m_result.world);
    if (f.images > 0) {
      QStringList per;
      for (const auto& [images, samples] : f.images_per_sample)
        per << QStringLiteral("%1: %2").arg(images).arg(samples);
      html += tr("; <b>%1 images</b>, %2 visual tokens (samples by image count %3)")
                  .arg(f.images)
                  .arg(f.visual_tokens)
                  .arg(per.join(QStringLiteral(", ")));
    }
    html += QStringLiteral("</p>");
    const QString role = QString::fromStdString(f.role);
    for (const auto* list : {&f.refused_listed, &f.over_listed}) {
      for (const auto& l : *list) {
        const int row = m_lines->rowCount();
        m_lines->insertRow(row);
        m_lines->setItem(row, 0, item(role));
        m_lines->setItem(row, 1, item(QString::number(l.line)));
        m_lines->setItem(row, 2, item(QString::fromStdString(l.kind)));
        m_lines->setItem(row, 3, item(QString::fromStdString(l.reason)));
      }
    }
    for (const auto& s : f.largest_images) {
      const int row = m_images->rowCount();
      m_images->insertRow(row);
      m_images->setItem(row, 0, item(role + QLatin1Char(':') + QString::number(s.line)));
      m_images->setItem(
          row, 1, item(QStringLiteral("%1 x %2 x %3").arg(s.grid_t).arg(s.grid_h).arg(s.grid_w)));
      m_images->setItem(row, 2, item(QString::number(s.tokens)));
      m_images->setItem(row, 3, item(QString::fromStdString(s.path)));
    }
  }
  m_histFile->blockSignals(false);
  m_figures->setText(html);
  m_lines->resizeColumnsToContents();
  m_images->resizeColumnsToContents();
  drawHistogram();
}

void InspectPanel::drawHistogram() {
  m_plot->clearPlottables();
  m_plot->clearItems();
  const int index = m_histFile->currentIndex();
  if (index < 0 || index >= static_cast<int>(m_result.files.size())) {
    m_plot->replot();
    return;
  }
  const auto& h = m_result.files[static_cast<std::size_t>(index)].histogram;
  auto* bars = new QCPBars(m_plot->xAxis, m_plot->yAxis);
  bars->setName(tr("samples"));
  QVector<double> keys;
  QVector<double> values;
  double most = 1;
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    keys << (static_cast<double>(i) + 0.5) * static_cast<double>(h.width);
    values << static_cast<double>(h.counts[i]);
    most = std::max(most, static_cast<double>(h.counts[i]));
  }
  bars->setWidth(static_cast<double>(h.width) * 0.9);
  bars->setData(keys, values);
  auto* line = new QCPItemStraightLine(m_plot);
  const auto seq = static_cast<double>(m_result.seq_len);
  line->point1->setCoords(seq, 0);
  line->point2->setCoords(seq, 1);
  line->setPen(QPen(Qt::red, 2, Qt::DashLine));
  auto* label = new QCPItemText(m_plot);
  label->position->setCoords(seq, most);
  label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
  label->setText(tr("data.seq_len = %1").arg(m_result.seq_len));
  label->setColor(Qt::red);
  m_plot->xAxis->setRange(
      0, std::max(seq, static_cast<double>(h.width) * static_cast<double>(h.counts.size())) * 1.02);
  m_plot->yAxis->setRange(0, most * 1.15);
  m_plot->replot();
}

void InspectPanel::lineClicked(int row) {
  const auto* file = m_lines->item(row, 0);
  const auto* line = m_lines->item(row, 1);
  if (file == nullptr || line == nullptr) return;
  const bool eval = file->text() == QLatin1String("eval");
  showLine(line->text().toLongLong(), eval);
}

void InspectPanel::showSample(const Result<data::SampleView>& result) {
  m_progress->setValue(1000);
  m_sample->images.clear();
  m_thumbnails = 0;
  m_lossText.clear();
  if (!result) {
    m_status->setText(tr("The trainer refuses this line: %1").arg(escaped(result.message())));
    m_sample->setHtml(QStringLiteral("<p>%1</p>").arg(escaped(result.message())));
    return;
  }
  const auto& s = *result;
  std::int64_t loss = 0;
  for (std::size_t t = 1; t < s.labels.size(); ++t) loss += s.labels[t] != -100 ? 1 : 0;
  m_status->setText(tr("%1:%2: %3 tokens (data.seq_len %4), %5 carry loss (highlighted)")
                        .arg(escaped(s.path))
                        .arg(s.line)
                        .arg(s.input_ids.size())
                        .arg(s.seq_len)
                        .arg(loss));
  QString html = QStringLiteral("<p style=\"font-family:monospace; white-space:pre-wrap\">");
  for (const auto& seg : s.segments) {
    if (seg.image >= 0 && seg.image < static_cast<std::int64_t>(s.images.size())) {
      const auto& im = s.images[static_cast<std::size_t>(seg.image)];
      auto rgb = data::read_image(im.path);
      const QString caption = tr("[image %1: %2 x %3 x %4 patches, %5 tokens]")
                                  .arg(seg.image)
                                  .arg(im.grid_t)
                                  .arg(im.grid_h)
                                  .arg(im.grid_w)
                                  .arg(im.tokens);
      if (rgb) {
        QImage qimg(rgb->pixels.data(), rgb->width, rgb->height, qsizetype{rgb->width} * 3,
                    QImage::Format_RGB888);
        const QString name = QStringLiteral("inspect-thumb%1").arg(m_thumbnails++);
        m_sample->images.insert(name, qimg.scaled(kThumbSize, kThumbSize, Qt::KeepAspectRatio,
                                                  Qt::SmoothTransformation));
        html += QStringLiteral("<img src=\"%1\" title=\"%2\">").arg(name, caption.toHtmlEscaped());
      }
      html += QStringLiteral("<i>%1</i>").arg(caption.toHtmlEscaped());
      continue;
    }
    if (seg.loss) {
      m_lossText += QString::fromStdString(seg.text);
      html += QStringLiteral("<span style=\"%1\">%2</span>")
                  .arg(QLatin1String(kLossStyle), htmlText(seg.text));
    } else {
      html += htmlText(seg.text);
    }
  }
  m_sample->setHtml(html + QStringLiteral("</p>"));
}

}  // namespace shardscope::ui
