#include "ui/plots/logview.h"

#include <QCheckBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSpinBox>
#include <QTextBlock>
#include <QVBoxLayout>

#include "ui/data/runlog.h"

Q_LOGGING_CATEGORY(lcLogView, "shardscope.ui.logview")

namespace shardscope::ui {

LogView::LogView(RunLog& runLog, QWidget* parent)
    : QWidget(parent),
      m_runLog(runLog),
      m_title(new QLabel(tr("Log"), this)),
      m_rank(new QSpinBox(this)),
      m_follow(new QCheckBox(tr("Follow"), this)),
      m_search(new QLineEdit(this)),
      m_matches(new QLabel(this)),
      m_text(new QPlainTextEdit(this)) {
  m_rank->setPrefix(tr("rank "));
  m_rank->setRange(0, 0);
  m_rank->setToolTip(tr("Which rank's log to show (rank-N.log)"));
  m_follow->setChecked(true);
  m_follow->setToolTip(tr("Keep the newest line in view as the log grows"));
  m_search->setPlaceholderText(tr("Search the log (Enter: next match)"));
  m_search->setClearButtonEnabled(true);
  m_text->setReadOnly(true);
  m_text->setLineWrapMode(QPlainTextEdit::NoWrap);
  m_text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_text->setPlaceholderText(tr("Select a run to see its log"));

  auto* controls = new QHBoxLayout;
  m_title->setObjectName(QStringLiteral("logTitle"));
  controls->addWidget(m_title);
  controls->addWidget(m_rank);
  controls->addWidget(m_follow);
  controls->addWidget(m_search, 1);
  controls->addWidget(m_matches);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  layout->addWidget(m_text);

  connect(&runLog, &RunLog::logLoaded, this, &LogView::onLogLoaded);
  connect(m_rank, &QSpinBox::valueChanged, this, [this](int rank) {
    if (m_runId >= 0) m_runLog.watchLog(m_runId, rank);
  });
  connect(m_search, &QLineEdit::textChanged, this, &LogView::search);
  connect(m_search, &QLineEdit::returnPressed, this, &LogView::findNext);
}

void LogView::setRun(qint64 runId, int worldSize, const QString& name, int selected, bool ended) {
  const QString shown = name.isEmpty() ? tr("run %1").arg(runId) : name;
  m_title->setText(runId < 0 ? tr("Log")
                   : selected > 1
                       ? tr("Log of %1 (current of %2 selected)").arg(shown).arg(selected)
                       : tr("Log of %1").arg(shown));
  m_shown = runId < 0 ? QString() : shown;
  setEnded(ended);
  if (runId == m_runId) return;
  m_runId = runId;
  m_rank->setRange(0, std::max(0, worldSize - 1));
  m_lines.clear();
  m_text->clear();
  if (runId >= 0) m_runLog.watchLog(runId, m_rank->value());
}

void LogView::setEnded(bool ended) {
  // "yet" only while it runs: an ended run with no lines will have none (its trainer printed
  // nothing to stdout or stderr besides its events), and says where its files are.
  m_text->setPlaceholderText(
      m_shown.isEmpty() ? tr("Select a run to see its log")
      : !ended          ? tr("No log lines from %1 yet").arg(m_shown)
                        : tr("%1 has ended without a log line from this rank: its trainer printed "
                                      "nothing besides its events (rank-N.log in its run directory)")
                     .arg(m_shown));
}

QString LogView::title() const { return m_title->text(); }
int LogView::rank() const { return m_rank->value(); }
void LogView::setRank(int rank) { m_rank->setValue(rank); }
int LogView::lineCount() const { return static_cast<int>(m_lines.size()); }

void LogView::onLogLoaded(const LogSnapshot& log) {
  if (log.runId != m_runId || log.rank != m_rank->value() || log.lines == m_lines) return;
  QScrollBar* bar = m_text->verticalScrollBar();
  const int keep = bar->value();
  // The worker sends the last lines; when they extend what is shown, append only the new ones.
  const bool extends = !m_lines.isEmpty() && log.lines.size() > m_lines.size() &&
                       log.lines.first() == m_lines.first();
  if (extends) {
    for (qsizetype i = m_lines.size(); i < log.lines.size(); ++i)
      m_text->appendPlainText(log.lines[i]);
  } else {
    m_text->setPlainText(log.lines.join(QLatin1Char('\n')));
  }
  m_lines = log.lines;
  if (m_follow->isChecked()) {
    bar->setValue(bar->maximum());
  } else {
    bar->setValue(keep);
  }
  if (!m_search->text().isEmpty()) search(m_search->text());
}

int LogView::search(const QString& text) {
  QList<QTextEdit::ExtraSelection> marks;
  if (!text.isEmpty()) {
    QTextDocument* doc = m_text->document();
    QTextCursor cursor(doc);
    while (!(cursor = doc->find(text, cursor)).isNull()) {
      QTextEdit::ExtraSelection mark;
      mark.cursor = cursor;
      mark.format.setBackground(QColor(0xff, 0xe0, 0x66));
      mark.format.setForeground(Qt::black);
      marks.append(mark);
    }
  }
  m_text->setExtraSelections(marks);
  m_matches->setText(text.isEmpty() ? QString() : tr("%n match(es)", nullptr, int(marks.size())));
  return static_cast<int>(marks.size());
}

void LogView::findNext() {
  const QString text = m_search->text();
  if (text.isEmpty()) return;
  if (!m_text->find(text)) {
    m_text->moveCursor(QTextCursor::Start);  // wrap around
    m_text->find(text);
  }
  m_follow->setChecked(false);  // the user is reading: do not jump away
}

}  // namespace shardscope::ui
