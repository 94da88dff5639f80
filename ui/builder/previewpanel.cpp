// Model and data preview for the builder, on spec and data (no LibTorch).
#include "ui/builder/previewpanel.h"

#include <QFileInfo>
#include <QHash>
#include <QImage>
#include <QLabel>
#include <QLoggingCategory>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/image/image.h"
#include "data/text/chat.h"
#include "data/text/packing.h"
#include "data/text/sft.h"
#include "data/text/sft_prepare.h"
#include "data/text/tokenizer.h"
#include "spec/hf_config.h"
#include "spec/model_shape.h"

Q_LOGGING_CATEGORY(lcPreviewPanel, "shardscope.ui.builder.preview")

namespace shardscope::ui {
namespace {

constexpr int kPreviewSamples = 3;
// Samples the packing summary tokenizes (images included) to count rows.
constexpr int kPackingSamples = 32;
constexpr int kThumbSize = 96;            // pixels, longest side
constexpr int kTokensShown = 48;          // token ids listed per sample
constexpr std::size_t kTextShown = 1500;  // bytes of templated text per sample

QString escaped(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

// The first `n` non-blank lines of a file, or an error message.
std::optional<std::vector<std::string>> firstLines(const std::string& path, int n) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<std::string> lines;
  std::string line;
  while (static_cast<int>(lines.size()) < n && std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

}  // namespace

// A text browser whose images are thumbnails held in memory (setHtml clears a document's own
// resources, so they are served from here instead).
class ThumbnailBrowser : public QTextBrowser {
 public:
  using QTextBrowser::QTextBrowser;
  QHash<QString, QImage> images;
  QVariant loadResource(int type, const QUrl& name) override {
    if (type == QTextDocument::ImageResource && images.contains(name.toString())) {
      return images.value(name.toString());
    }
    return QTextBrowser::loadResource(type, name);
  }
};

QString groupedNumber(std::int64_t n) {
  QString digits = QString::number(n < 0 ? -n : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, QLatin1Char(','));
  return n < 0 ? QLatin1Char('-') + digits : digits;
}

PreviewPanel::PreviewPanel(QWidget* parent) : QWidget(parent) {
  m_model = new QLabel(this);
  m_model->setWordWrap(true);
  m_model->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_data = new ThumbnailBrowser(this);
  m_data->setOpenLinks(false);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_model);
  layout->addWidget(m_data, 1);
}

QString PreviewPanel::modelText() const { return m_model->text(); }
QString PreviewPanel::dataText() const { return m_data->toPlainText(); }

void PreviewPanel::setExperiment(const spec::Experiment& exp) {
  if (m_first || !(exp.model == m_lastModel) || exp.train.freeze != m_lastFreeze) readModel(exp);
  if (m_first || !(exp.data == m_lastData) || exp.model.path != m_lastModel.path) readData(exp);
  m_first = false;
  m_lastModel = exp.model;
  m_lastData = exp.data;
  m_lastFreeze = exp.train.freeze;
}

void PreviewPanel::readModel(const spec::Experiment& exp) {
  std::vector<spec::LayerShape> layers;
  QString what;
  if (exp.model.arch == "tiny") {
    layers = spec::qwen2_layers(spec::tiny_dims(exp.model));
    what = tr("tiny test model");
  } else {
    auto config = spec::read_hf_config(exp.model.path);
    if (!config) {
      m_total = m_trainable = -1;
      m_model->setText(tr("<b>Model:</b> %1").arg(escaped(config.message())));
      return;
    }
    layers = spec::hf_layers(*config);
    what = QString::fromStdString(config->model_type) + QStringLiteral(" from ") +
           QString::fromStdString(exp.model.path).toHtmlEscaped();
  }
  (void)spec::apply_freeze(exp.train, layers);  // unmatched globs are validation's message
  m_total = spec::count_params(layers);
  m_trainable = 0;
  for (const auto& l : layers) {
    for (const auto& p : l.params) {
      if (p.trainable && p.tied_to.empty()) m_trainable += spec::numel(p.shape);
    }
  }
  QString lora;
  if (exp.lora.enabled)
    lora = tr(" (LoRA adapters come on top; the base weights above train only without LoRA)");
  m_model->setText(tr("<b>Model:</b> %1: <b>%2</b> parameters, %3 trainable%4")
                       .arg(what, groupedNumber(m_total), groupedNumber(m_trainable), lora));
}

QString PreviewPanel::chatSampleHtml(const std::string& line, const std::string& base_dir,
                                     int index) {
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    return tr("<p>sample %1: not JSON (%2)</p>").arg(index).arg(QString::fromUtf8(e.what()));
  }
  auto sample = data::parse_sft_record(record, base_dir);
  if (!sample) return tr("<p>sample %1: %2</p>").arg(index).arg(escaped(sample.message()));
  QString html = tr("<p><b>sample %1</b>").arg(index);
  for (const auto& path : sample->images) {
    auto image = data::read_image(path);
    if (!image) {
      html += QStringLiteral(" <i>%1</i>").arg(escaped(image.message()));
      continue;
    }
    QImage qimg(image->pixels.data(), image->width, image->height, qsizetype{image->width} * 3,
                QImage::Format_RGB888);
    const QString name = QStringLiteral("thumb%1").arg(m_thumbnails++);
    m_data->images.insert(
        name, qimg.scaled(kThumbSize, kThumbSize, Qt::KeepAspectRatio, Qt::SmoothTransformation));
    html += QStringLiteral(" <img src=\"%1\"> ").arg(name);
  }
  std::string text = data::render_qwen2vl_chat(sample->messages).text;
  if (text.size() > kTextShown) text = text.substr(0, kTextShown) + "...";
  return html + QStringLiteral("</p><pre>%1</pre>").arg(escaped(text));
}

QString PreviewPanel::packingHtml(const spec::Experiment& exp, const std::string& base_dir) {
  auto lines = firstLines(exp.data.train_path, kPackingSamples);
  auto preparer = data::SftPreparer::open(exp.model.path);
  if (!lines || !preparer) return {};  // the samples above say what is wrong
  std::vector<std::int64_t> lengths;
  for (const auto& line : *lines) {
    auto record = nlohmann::json::parse(line, nullptr, false);
    auto sample = data::parse_sft_record(record, base_dir);
    if (!sample) continue;
    auto prepared = preparer->prepare(*sample);
    if (prepared) lengths.push_back(static_cast<std::int64_t>(prepared->input_ids.size()));
  }
  const auto seq_len = exp.data.seq_len;
  if (lengths.empty() || seq_len < 1) return {};
  // As the trainer does: each rank's share of a step packed on its own, or cut into micro-batches
  // padded to their longest sample.
  const int world = std::max(1, spec::launch_world_size(exp.launch));
  const auto share = std::max<std::int64_t>(1, exp.train.batch_size / world);
  const auto micro = std::max<std::int64_t>(
      1, exp.train.micro_batch_size > 0 ? exp.train.micro_batch_size : share);
  std::int64_t tokens = 0;
  std::int64_t rows = 0;
  std::int64_t padded = 0;  // slots of the unpacked micro-batches
  std::int64_t shares = 0;
  for (std::size_t first = 0; first < lengths.size(); first += static_cast<std::size_t>(share)) {
    const auto end = std::min(lengths.size(), first + static_cast<std::size_t>(share));
    std::vector<std::int64_t> part(lengths.begin() + static_cast<std::ptrdiff_t>(first),
                                   lengths.begin() + static_cast<std::ptrdiff_t>(end));
    auto packed = data::pack_rows(part, seq_len);
    if (!packed) return tr("<p><b>Packing:</b> %1</p>").arg(escaped(packed.message()));
    tokens += packed->tokens;
    rows += static_cast<std::int64_t>(packed->rows.size());
    ++shares;
    for (std::size_t m = 0; m < part.size(); m += static_cast<std::size_t>(micro)) {
      const auto stop = std::min(part.size(), m + static_cast<std::size_t>(micro));
      padded += static_cast<std::int64_t>(stop - m) *
                *std::max_element(part.begin() + static_cast<std::ptrdiff_t>(m),
                                  part.begin() + static_cast<std::ptrdiff_t>(stop));
    }
  }
  const double packedFull = 100.0 * static_cast<double>(tokens) /
                            (static_cast<double>(rows) * static_cast<double>(seq_len));
  const double paddedFull = 100.0 * static_cast<double>(tokens) / static_cast<double>(padded);
  const QString what =
      tr("the first %1 samples (%2 tokens) in shares of %3 (a rank's part of a step: "
         "train.batch_size %4 over %5 ranks)")
          .arg(lengths.size())
          .arg(tokens)
          .arg(share)
          .arg(exp.train.batch_size)
          .arg(world);
  const QString packedText =
      tr("packed, %1 rows of %2 tokens, %3 a rank a step, %4% of their slots real tokens")
          .arg(rows)
          .arg(seq_len)
          .arg(static_cast<double>(rows) / static_cast<double>(shares), 0, 'f', 1)
          .arg(packedFull, 0, 'f', 0);
  const QString paddedText =
      tr("one sample a row padded to each micro-batch's longest, %1% real tokens")
          .arg(paddedFull, 0, 'f', 0);
  return exp.data.pack
             ? tr("<p><b>Packing</b> (data.pack = true): %1: %2; %3 unpacked.</p>")
                   .arg(what, packedText, paddedText)
             : tr("<p><b>No packing</b> (data.pack = false): %1: %2; %3 with data.pack.</p>")
                   .arg(what, paddedText, packedText);
}

void PreviewPanel::readData(const spec::Experiment& exp) {
  m_thumbnails = 0;
  m_data->images.clear();
  const std::string& path = exp.data.train_path;
  auto lines = path.empty() ? std::nullopt : firstLines(path, kPreviewSamples);
  if (!lines) {
    m_data->setHtml(path.empty() ? tr("<p>No data file: set data.train_path.</p>")
                                 : tr("<p>Cannot read %1.</p>").arg(escaped(path)));
    return;
  }
  std::optional<data::Tokenizer> tokenizer;
  if (!exp.model.path.empty() && QFileInfo::exists(QString::fromStdString(exp.model.path) +
                                                   QStringLiteral("/tokenizer.json"))) {
    auto t = data::Tokenizer::load(exp.model.path);
    if (t) tokenizer = std::move(*t);
  }
  const std::string base = QFileInfo(QString::fromStdString(path)).absolutePath().toStdString();
  QString html = tr("<p>First %1 samples of <code>%2</code> (format %3)</p>")
                     .arg(lines->size())
                     .arg(escaped(path), escaped(exp.data.format));
  for (int i = 0; i < static_cast<int>(lines->size()); ++i) {
    const std::string& line = (*lines)[static_cast<std::size_t>(i)];
    if (exp.data.format == "chat") {
      html += chatSampleHtml(line, base, i);
      if (i + 1 == static_cast<int>(lines->size())) html += packingHtml(exp, base);
      continue;
    }
    nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (exp.data.format == "text" && record.is_object() && record.contains("text")) {
      html += tr("<p><b>sample %1</b></p><pre>%2</pre>")
                  .arg(i)
                  .arg(escaped(record["text"].get<std::string>().substr(0, kTextShown)));
    } else if (record.is_object() && record.contains("input_ids") &&
               record["input_ids"].is_array()) {
      std::vector<std::int32_t> ids;
      QStringList shown;
      for (const auto& v : record["input_ids"]) {
        if (!v.is_number_integer()) break;
        ids.push_back(v.get<std::int32_t>());
        if (shown.size() < kTokensShown) shown << QString::number(ids.back());
      }
      html += tr("<p><b>sample %1</b>: %2 tokens</p><pre>%3%4</pre>")
                  .arg(i)
                  .arg(ids.size())
                  .arg(shown.join(QLatin1Char(' ')),
                       static_cast<qsizetype>(ids.size()) > kTokensShown ? QStringLiteral(" ...")
                                                                         : QString());
      if (tokenizer) html += QStringLiteral("<pre>%1</pre>").arg(escaped(tokenizer->decode(ids)));
    } else {
      html += tr("<p>sample %1: not a %2 record: %3</p>")
                  .arg(i)
                  .arg(escaped(exp.data.format), escaped(line.substr(0, 200)));
    }
  }
  m_data->setHtml(html);
}

}  // namespace shardscope::ui
