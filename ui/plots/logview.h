// LogView: one rank's log lines (both the stderr log and malformed event lines) with follow (keep
// the newest line in view) and search (every match highlighted, Enter jumps to the next). With
// several runs selected it shows the current (last clicked) one and says so in its header.
#pragma once

#include <QWidget>

#include "ui/data/runlogtypes.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QSpinBox;

namespace shardscope::ui {

class RunLog;

class LogView : public QWidget {
  Q_OBJECT

 public:
  explicit LogView(RunLog& runLog, QWidget* parent = nullptr);

  /// Shows the log of `runId` (rank from the spin box), named `name`, the current one of
  /// `selected` selected runs (the header says so when they are several); -1 shows nothing.
  /// `ended`: the run has ended, so an empty log will stay empty, and says so.
  void setRun(qint64 runId, int worldSize, const QString& name = QString(), int selected = 1,
              bool ended = false);
  /// The shown run has ended (the run table's last read): an empty log says it stays empty.
  void setEnded(bool ended);
  /// The header: which run the log is of ("Log of sweep-3, the current of 3 selected runs").
  QString title() const;
  qint64 runId() const { return m_runId; }
  int rank() const;
  void setRank(int rank);
  /// Lines shown now.
  int lineCount() const;
  /// Highlights every match of `text`; returns how many there are.
  int search(const QString& text);
  QPlainTextEdit* textEdit() const { return m_text; }
  QCheckBox* followBox() const { return m_follow; }

 private:
  void onLogLoaded(const LogSnapshot& log);
  void findNext();

  RunLog& m_runLog;
  QLabel* m_title = nullptr;
  QSpinBox* m_rank = nullptr;
  QCheckBox* m_follow = nullptr;
  QLineEdit* m_search = nullptr;
  QLabel* m_matches = nullptr;
  QPlainTextEdit* m_text = nullptr;
  qint64 m_runId = -1;
  QString m_shown;  // the shown run's name; empty: none
  QStringList m_lines;
};

}  // namespace shardscope::ui
