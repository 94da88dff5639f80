#include "ui/widgets/plotexport.h"

#include <qcustomplot.h>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QPdfWriter>
#include <QPushButton>
#include <QSpinBox>
#include <QSvgGenerator>

#include <algorithm>
#include <functional>

#include "ui/widgets/curveplot.h"

namespace shardscope::ui {

namespace {

constexpr int kMaxSide = 20000;  // pixels: a bigger picture is a typo, not a report

Result<QString> checkedFormat(const QString& path, int width, int height) {
  if (width <= 0 || height <= 0 || width > kMaxSide || height > kMaxSide) {
    return fail(path.toStdString() + ": size " + std::to_string(width) + "x" +
                std::to_string(height) + " must be 1.." + std::to_string(kMaxSide) +
                " pixels each way");
  }
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix != QLatin1String("png") && suffix != QLatin1String("svg") &&
      suffix != QLatin1String("pdf")) {
    return fail(path.toStdString() + ": unknown picture format \"" + suffix.toStdString() +
                "\"; name the file .png, .svg or .pdf");
  }
  return suffix;
}

Result<void> written(const QString& path, bool ok) {
  if (ok && QFileInfo(path).size() > 0) return shardscope::ok();
  return fail(path.toStdString() + ": could not write the picture (does " +
              QFileInfo(path).absolutePath().toStdString() +
              " exist, and may this user write to it?)");
}

// Runs `draw` with a painter on an SVG or PDF file of width x height (PDF: one page that size, at
// 96 dpi, so a pixel is a point-and-a-third as on screen).
bool paintVector(const QString& suffix, const QString& path, int width, int height,
                 const std::function<void(QPainter&)>& draw) {
  if (suffix == QLatin1String("svg")) {
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(QSize(width, height));
    svg.setViewBox(QRect(0, 0, width, height));
    QPainter painter;
    if (!painter.begin(&svg)) return false;
    draw(painter);
    return painter.end();
  }
  QPdfWriter pdf(path);
  pdf.setResolution(96);
  pdf.setPageSize(
      QPageSize(QSizeF(width, height), QPageSize::Point, QString(), QPageSize::ExactMatch));
  pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
  QPainter painter;
  if (!painter.begin(&pdf)) return false;
  const QRect page = painter.viewport();
  painter.scale(double(page.width()) / width, double(page.height()) / height);
  draw(painter);
  return painter.end();
}

}  // namespace

Result<void> savePlot(QCustomPlot* plot, const QString& path, int width, int height) {
  auto format = checkedFormat(path, width, height);
  if (!format) return format.error();
  // A smoothing weight still being computed in the background: the picture shows it.
  if (auto* curves = qobject_cast<CurvePlot*>(plot->parentWidget())) curves->finishSmoothing();
  if (*format == QLatin1String("png")) return written(path, plot->savePng(path, width, height));
  if (*format == QLatin1String("pdf")) return written(path, plot->savePdf(path, width, height));
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(QSize(width, height));
  svg.setViewBox(QRect(0, 0, width, height));
  QCPPainter painter;
  bool ok = painter.begin(&svg);
  if (ok) {
    plot->toPainter(&painter, width, height);
    ok = painter.end();
  }
  return written(path, ok);
}

Result<void> savePage(QWidget* page, const QString& path, int width, int height) {
  auto format = checkedFormat(path, width, height);
  if (!format) return format.error();
  const QSize before = page->size();
  const QSize laidOut = QSize(width, height).expandedTo(page->minimumSizeHint());
  page->resize(laidOut);
  for (CurvePlot* curves : page->findChildren<CurvePlot*>()) curves->finishSmoothing();
  // Every plot redrawn at its new size now: a plot paints from a buffer a replot fills.
  for (QCustomPlot* plot : page->findChildren<QCustomPlot*>())
    plot->replot(QCustomPlot::rpImmediateRefresh);
  const double scale = std::min(double(width) / laidOut.width(), double(height) / laidOut.height());
  const auto draw = [&](QPainter& painter) {
    painter.fillRect(QRect(0, 0, width, height), Qt::white);
    painter.scale(scale, scale);
    page->render(&painter, QPoint(), QRegion(), QWidget::DrawChildren);
  };
  bool ok = false;
  if (*format == QLatin1String("png")) {
    QImage image(width, height, QImage::Format_ARGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    painter.setRenderHint(QPainter::SmoothPixmapTransform);
    draw(painter);
    painter.end();
    ok = image.save(path, "PNG");
  } else {
    ok = paintVector(*format, path, width, height, draw);
  }
  page->resize(before);
  for (QCustomPlot* plot : page->findChildren<QCustomPlot*>())
    plot->replot(QCustomPlot::rpQueuedReplot);
  return written(path, ok);
}

ExportDialog::ExportDialog(const QString& title, const QString& path, QSize size, QWidget* parent)
    : QDialog(parent),
      m_path(new QLineEdit(path, this)),
      m_width(new QSpinBox(this)),
      m_height(new QSpinBox(this)),
      m_error(new QLabel(this)) {
  setWindowTitle(title);
  setObjectName(QStringLiteral("exportDialog"));
  for (QSpinBox* box : {m_width, m_height}) {
    box->setRange(16, kMaxSide);
    box->setSuffix(tr(" px"));
  }
  m_width->setValue(size.width());
  m_height->setValue(size.height());
  m_path->setToolTip(tr("The file's suffix picks the format: .png, .svg or .pdf"));
  auto* browse = new QPushButton(tr("Browse…"), this);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString chosen = QFileDialog::getSaveFileName(this, windowTitle(), m_path->text(),
                                                        tr("Pictures (*.png *.svg *.pdf)"));
    if (!chosen.isEmpty()) m_path->setText(chosen);
  });
  auto* fileRow = new QHBoxLayout;
  fileRow->addWidget(m_path, 1);
  fileRow->addWidget(browse);
  m_error->setStyleSheet(QStringLiteral("color: #b00020"));
  m_error->setWordWrap(true);
  m_error->hide();
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &ExportDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &ExportDialog::reject);
  auto* form = new QFormLayout(this);
  form->addRow(tr("File"), fileRow);
  form->addRow(tr("Width"), m_width);
  form->addRow(tr("Height"), m_height);
  form->addRow(m_error);
  form->addRow(buttons);
}

QString ExportDialog::path() const { return m_path->text().trimmed(); }

QSize ExportDialog::imageSize() const { return {m_width->value(), m_height->value()}; }

void ExportDialog::accept() {
  auto format = checkedFormat(path(), m_width->value(), m_height->value());
  if (path().isEmpty() || !format) {
    m_error->setText(path().isEmpty() ? tr("Name the file to write (.png, .svg or .pdf).")
                                      : QString::fromStdString(format.message()));
    m_error->show();
    return;
  }
  QDialog::accept();
}

}  // namespace shardscope::ui
