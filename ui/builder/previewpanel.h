// The builder's model and data preview: the model's parameter counts (from config.json, or the
// tiny model's fields) and the first samples of the training file as the trainer will see them
// (chat-templated text with image thumbnails; token ids, decoded when the model folder has a
// tokenizer.json), and for chat data how its first samples fill rows (data.pack).
#pragma once

#include <QWidget>
#include <cstdint>

#include "spec/experiment.h"

class QLabel;

namespace shardscope::ui {

class ThumbnailBrowser;

class PreviewPanel : public QWidget {
  Q_OBJECT

 public:
  explicit PreviewPanel(QWidget* parent = nullptr);

  /// Re-reads the model (when model.* changed) and the data (when data.* changed).
  void setExperiment(const spec::Experiment& exp);
  /// Parameter counts shown (-1 when the model could not be read).
  std::int64_t totalParams() const { return m_total; }
  std::int64_t trainableParams() const { return m_trainable; }
  QString modelText() const;
  /// The preview document as plain text (tests and screen readers).
  QString dataText() const;
  /// Image thumbnails in the preview.
  int thumbnailCount() const { return m_thumbnails; }

 private:
  void readModel(const spec::Experiment& exp);
  void readData(const spec::Experiment& exp);
  QString chatSampleHtml(const std::string& line, const std::string& base_dir, int index);
  /// Chat data with the model's tokenizer: the first samples' rows a step, packed and not.
  QString packingHtml(const spec::Experiment& exp, const std::string& base_dir);

  QLabel* m_model = nullptr;
  ThumbnailBrowser* m_data = nullptr;
  std::int64_t m_total = -1;
  std::int64_t m_trainable = -1;
  int m_thumbnails = 0;
  spec::ModelSection m_lastModel;
  spec::DataSection m_lastData;
  std::vector<std::string> m_lastFreeze;
  bool m_first = true;
};

/// 2208985600 -> "2,208,985,600".
QString groupedNumber(std::int64_t n);

}  // namespace shardscope::ui
