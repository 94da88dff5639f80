// SamplesPanel: what the model answers to the experiment's probes (eval.probes), as a filmstrip.
// One row per probe, one column per evaluation step of the selected run, or one column per trial
// (its best evaluation by the sweep's objective, else its last) when several runs are selected or
// a trial is picked in Compare. Each cell is the answer with the words that changed from the
// column to its left and those not in the reference highlighted, and its scores under it.
// Filters keep the probes whose answer changed, or is wrong. The answers come from the run log's
// worker thread (RunLog::watchSamples), so a live run's new evaluations appear as they land.
// A person marks the selected answers good (G), bad (B) or clears the marks (0), or through the
// context menu; the marks are written to the run log through RunLog's worker (schema 11) and come
// back with the answers, so they survive a reload; the summary counts those of the shown runs.
#pragma once

#include <QWidget>

#include <optional>

#include "ui/data/samplesdata.h"

class QAction;
class QCheckBox;
class QLabel;
class QMenu;
class QTableView;

namespace shardscope::ui {

class RunLog;
class SamplesDelegate;
class SamplesFilter;
class SamplesModel;

class SamplesPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SamplesPanel(RunLog& runLog, QWidget* parent = nullptr);

  /// The selected runs: one run's steps as columns, several runs as one column each (their best
  /// step by `objectiveKey` when given, minimised or not, else their last). Asking again for what
  /// is shown does nothing (a refresh of the run table re-announces its selection).
  void setRuns(const QList<qint64>& runIds, const QString& objectiveKey = {}, bool minimize = true);
  /// The trials `runIds` as columns, with trial `focusRunId`'s column selected and scrolled to
  /// once it is there (Compare's trialActivated).
  void showTrials(const QList<qint64>& runIds, qint64 focusRunId, const QString& objectiveKey = {},
                  bool minimize = true);

  /// Run `runId` alone, its steps as columns, with the column of `step` selected and scrolled to
  /// once its answers are there (the Checkpoints dialog's Open samples at this step).
  void showStep(qint64 runId, qint64 step);

  QTableView* view() const { return m_view; }
  SamplesModel* model() const { return m_model; }
  SamplesFilter* filter() const { return m_filter; }
  SamplesDelegate* delegate() const { return m_delegate; }
  QCheckBox* changedFilter() const { return m_changed; }
  QCheckBox* wrongFilter() const { return m_wrong; }
  QLabel* summary() const { return m_summary; }
  /// The answer cells' context menu and its actions (mark good, bad, clear the mark).
  QMenu* verdictMenu() const { return m_menu; }
  QAction* markGoodAction() const { return m_markGood; }
  QAction* markBadAction() const { return m_markBad; }
  QAction* clearMarkAction() const { return m_clearMark; }
  /// Marks the selected answer cells (nullopt: clears their marks); false when none is selected.
  bool markSelected(std::optional<backend::Verdict> verdict);

  /// True once the shown runs' answers were read at least once.
  bool isLoaded() const { return m_loaded; }

 signals:
  /// Answers of the shown runs arrived (the first read, or new ones).
  void loaded();

 protected:
  /// The table's keys G, B and 0: mark the selected answers (see markSelected).
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void watch(const QList<qint64>& runIds, bool trials, const QString& objectiveKey, bool minimize);
  void onSamples(const SamplesDelta& delta);
  void updateSummary();
  static QString noRunText();
  void focusPending();
  void makeVerdictActions();
  /// "Marked: 2 good, 1 bad (good rate 67%)" over the shown runs; "" when none is marked.
  QString verdictSummary() const;

  RunLog& m_runLog;
  SamplesModel* m_model = nullptr;
  SamplesFilter* m_filter = nullptr;
  SamplesDelegate* m_delegate = nullptr;
  QTableView* m_view = nullptr;
  QCheckBox* m_changed = nullptr;
  QCheckBox* m_wrong = nullptr;
  QLabel* m_summary = nullptr;
  QMenu* m_menu = nullptr;
  QAction* m_markGood = nullptr;
  QAction* m_markBad = nullptr;
  QAction* m_clearMark = nullptr;
  QString m_objective;
  bool m_minimize = true;
  qint64 m_focusRun = -1;   // a trial whose column to select once it is there
  qint64 m_focusStep = -1;  // and its step's column (showStep); -1: its only or last
  bool m_loaded = false;
};

}  // namespace shardscope::ui
