// Saving plots as pictures for a report: one QCustomPlot, or a whole page of widgets (the
// Compare tab), as PNG, SVG or PDF by the file's suffix, at a chosen size in pixels; and the
// dialog that asks for the file and the size.
#pragma once

#include <QDialog>
#include <QSize>
#include <QString>

#include "spec/result.h"

class QCustomPlot;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace shardscope::ui {

/// Writes `plot` to `path` (.png, .svg or .pdf) at width x height, re-laid out at that size
/// (vector output for SVG and PDF).
[[nodiscard]] Result<void> savePlot(QCustomPlot* plot, const QString& path, int width, int height);

/// Writes `page` (every child as it is drawn) to `path` (.png, .svg or .pdf) at width x height:
/// the page is laid out at that size (no smaller than its minimum size, then scaled to fit),
/// drawn, and put back as it was.
[[nodiscard]] Result<void> savePage(QWidget* page, const QString& path, int width, int height);

/// Asks where to save a picture and at what size: a file (its suffix picks PNG, SVG or PDF),
/// width and height in pixels. OK is refused, with the reason shown, for another suffix.
class ExportDialog : public QDialog {
  Q_OBJECT

 public:
  ExportDialog(const QString& title, const QString& path, QSize size, QWidget* parent = nullptr);

  QString path() const;
  QSize imageSize() const;
  QLineEdit* pathEdit() const { return m_path; }
  QSpinBox* widthBox() const { return m_width; }
  QSpinBox* heightBox() const { return m_height; }

  void accept() override;

 private:
  QLineEdit* m_path = nullptr;
  QSpinBox* m_width = nullptr;
  QSpinBox* m_height = nullptr;
  QLabel* m_error = nullptr;
};

}  // namespace shardscope::ui
