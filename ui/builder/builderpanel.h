// The experiment builder panel: one form per section generated from spec's
// field catalogue, the spec's validation messages beside the field they name, memory panel,
// model/data preview, [search] editor, the exact TOML and command, open/save, undo/redo and
// templates. State lives in BuilderController; this class only builds and syncs widgets.
//
// Wiring (main window): `auto* builder = new shardscope::ui::BuilderPanel(this);` as a dock;
// connect builder->controller(), &BuilderController::launchRequested (QString path).
//
// Autotune (the toolbar button, its tab beside the memory panel): the saved experiment goes out
// as autotuneRequested (the app starts `shardscope-cli autotune` in its own session, as a sweep
// is started); the run log's record of it comes back through showAutotune (RunLog::
// watchAutotune), the candidates listed as each is settled; Stop asks for autotuneStopRequested;
// at the end the winner's file is offered (Open winner loads it here). Nothing here blocks: the
// start, the search and the reading happen in other threads and processes.
#pragma once

#include <QMap>
#include <QWidget>

#include "ui/data/runlogtypes.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QTabWidget;
class QTimer;

namespace shardscope::spec {
struct FieldInfo;
}

namespace shardscope::ui {

class BuilderController;
class CandidateTable;
class InspectPanel;
class MemoryChart;
class PreviewPanel;
class SearchEditor;

class BuilderPanel : public QWidget {
  Q_OBJECT

 public:
  explicit BuilderPanel(QWidget* parent = nullptr);

  BuilderController* controller() const { return m_controller; }
  /// The editor widget of "section.key" (QSpinBox, QLineEdit, QCheckBox or QComboBox).
  QWidget* editor(const QString& path) const;
  /// The label beside a field that shows its validation messages (hidden when none).
  QLabel* messageLabel(const QString& path) const;
  QPlainTextEdit* tomlPreview() const { return m_toml; }
  QLineEdit* commandPreview() const { return m_command; }
  /// Beside the command, while the experiment has no file: Launch saves it there first.
  QLabel* commandNote() const { return m_commandNote; }
  QPushButton* launchButton() const { return m_launch; }
  QCheckBox* replanOnOomBox() const { return m_replanOnOom; }
  MemoryChart* memoryChart() const { return m_memory; }
  PreviewPanel* previewPanel() const { return m_preview; }
  /// The Inspect data tab (data/inspect.h on a thread).
  InspectPanel* inspectPanel() const { return m_inspect; }
  /// The right-hand tabs (memory, model and data, inspect data, TOML, autotune).
  QTabWidget* sideTabs() const { return m_right; }
  /// Brings forward the right-hand tab that holds `content` (a tab's page may be a scroll area
  /// around it).
  void showSideTab(const QWidget* content);
  SearchEditor* searchEditor() const { return m_search; }
  QTabWidget* sections() const { return m_tabs; }
  QPushButton* autotuneButton() const { return m_autotune; }
  QPushButton* stopAutotuneButton() const { return m_stopTune; }
  /// Loads the autotune's winner file into the builder (enabled once it is written).
  QPushButton* openWinnerButton() const { return m_openWinner; }
  /// The winner's file, shown in full once written.
  QLineEdit* winnerPathEdit() const { return m_winnerPath; }
  /// What the autotune is doing, or why it did not start (names the fields to fix).
  QLabel* autotuneStatus() const { return m_tuneStatus; }
  CandidateTable* autotuneTable() const { return m_tuneTable; }
  /// The autotune's options: objective ("tokens_per_s"/"mfu"), time budget, step counts.
  QComboBox* autotuneObjective() const { return m_tuneObjective; }
  QSpinBox* autotuneSteps() const { return m_tuneSteps; }
  QSpinBox* autotuneWarmup() const { return m_tuneWarmup; }
  /// The study the last autotune records ("" before one was asked for).
  const QString& autotuneStudy() const { return m_tune.name; }
  /// The winner's file of the last autotune ("" until it is written).
  const QString& autotuneWinnerFile() const { return m_tune.winnerFile; }
  /// True from the request until its study ends (or it failed to start).
  bool isAutotuning() const { return m_tuning; }
  /// Applies pending model changes to every view now (normally coalesced on a timer).
  void refreshNow();
  /// The widgets have not caught up with the controller yet (a refresh is scheduled).
  bool isRefreshPending() const;

 public slots:
  void openDialog();
  void saveDialog(bool askPath = false);
  /// The Autotune button: checks and saves the experiment, then asks for the autotune.
  void requestAutotune();
  /// The app started the autotune recording study `study` as process `pid` (output in `log`).
  void autotuneStarted(const QString& study, qint64 pid, const QString& log);
  /// The app could not start the autotune of study `study`.
  void autotuneFailed(const QString& study, const QString& message);
  /// The run log's record of a watched autotune (ignored unless it is this panel's).
  void showAutotune(const shardscope::ui::AutotuneData& autotune);
  /// The run log's corrections of the estimate (RunLog::calibrationsLoaded): the memory panel
  /// states the corrected peak and says how many runs it rests on.
  void showCalibrations(const shardscope::ui::MemoryCalibrations& calibrations);

 signals:
  /// Start an autotune of the saved file `path`, recorded as study `study`.
  void autotuneRequested(const QString& path, const QString& study, const QString& objective,
                         double budgetMinutes, int steps, int warmup);
  /// Stop the autotune recorded as study `studyId` (`study`): its record ends stopped.
  void autotuneStopRequested(qint64 studyId, const QString& study);

 private:
  struct Row {
    QWidget* editor = nullptr;
    QLabel* message = nullptr;
  };
  QWidget* buildToolbar();
  QWidget* buildAutotune();
  void setTuneMessage(const QString& text, bool error);
  void checkTuneProcess();
  void endTuning();
  QWidget* buildSection(const QString& section);
  QWidget* buildEditor(const spec::FieldInfo& f);
  QLineEdit* lineEditor(const spec::FieldInfo& f);
  QWidget* withBrowse(QLineEdit* edit, const QString& path);
  void commitText(const QString& path, const QString& shown);
  void syncEditor(const QString& path);
  void showIssues();

  BuilderController* m_controller = nullptr;
  QMap<QString, Row> m_rows;
  QTabWidget* m_tabs = nullptr;
  QComboBox* m_templates = nullptr;
  QPushButton* m_launch = nullptr;
  QCheckBox* m_replanOnOom = nullptr;
  QLabel* m_summary = nullptr;
  QLabel* m_searchMessage = nullptr;
  QPlainTextEdit* m_toml = nullptr;
  QLineEdit* m_command = nullptr;
  QLabel* m_commandNote = nullptr;  // "not saved yet": Launch saves to the file the command names
  MemoryChart* m_memory = nullptr;
  PreviewPanel* m_preview = nullptr;
  InspectPanel* m_inspect = nullptr;
  SearchEditor* m_search = nullptr;
  QTimer* m_refresh = nullptr;
  QTabWidget* m_right = nullptr;
  QWidget* m_tunePage = nullptr;
  QPushButton* m_autotune = nullptr;
  QPushButton* m_stopTune = nullptr;
  QPushButton* m_openWinner = nullptr;
  QLineEdit* m_winnerPath = nullptr;  // the winner's file, selectable
  QLabel* m_tuneStatus = nullptr;
  CandidateTable* m_tuneTable = nullptr;
  QComboBox* m_tuneObjective = nullptr;
  QDoubleSpinBox* m_tuneMinutes = nullptr;
  QSpinBox* m_tuneSteps = nullptr;
  QSpinBox* m_tuneWarmup = nullptr;
  QTimer* m_tuneWatch = nullptr;  // notices a process that died before its record ended
  AutotuneData m_tune;            // the record as last shown
  bool m_tuning = false;
  bool m_tuneStopping = false;  // Stop was pressed: the record ends soon
  qint64 m_tunePid = 0;
  QString m_tuneLog;
  int m_tuneGoneChecks = 0;  // checks in a row that found the process gone
  static constexpr int kTuneWatchMs = 1000;
  QStringList m_dirty;
  bool m_allDirty = true;
};

}  // namespace shardscope::ui
