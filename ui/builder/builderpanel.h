// The experiment builder panel (issue #7): one form per section generated from trainer/spec's
// field catalogue, the spec's validation messages beside the field they name, memory panel,
// model/data preview, [search] editor, the exact TOML and command, open/save, undo/redo and
// templates. State lives in BuilderController; this class only builds and syncs widgets.
//
// Wiring (main window): `auto* builder = new shardscope::ui::BuilderPanel(this);` as a dock;
// connect builder->controller(), &BuilderController::launchRequested (QString path).
#pragma once

#include <QMap>
#include <QWidget>

class QComboBox;
class QLabel;
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
  QPushButton* launchButton() const { return m_launch; }
  MemoryChart* memoryChart() const { return m_memory; }
  PreviewPanel* previewPanel() const { return m_preview; }
  SearchEditor* searchEditor() const { return m_search; }
  QTabWidget* sections() const { return m_tabs; }
  /// Applies pending model changes to every view now (normally coalesced on a timer).
  void refreshNow();
  /// The widgets have not caught up with the controller yet (a refresh is scheduled).
  bool isRefreshPending() const;

 public slots:
  void openDialog();
  void saveDialog(bool askPath = false);

 private:
  struct Row {
    QWidget* editor = nullptr;
    QLabel* message = nullptr;
  };
  QWidget* buildToolbar();
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
  QLabel* m_summary = nullptr;
  QLabel* m_searchMessage = nullptr;
  QPlainTextEdit* m_toml = nullptr;
  QLineEdit* m_command = nullptr;
  MemoryChart* m_memory = nullptr;
  PreviewPanel* m_preview = nullptr;
  SearchEditor* m_search = nullptr;
  QTimer* m_refresh = nullptr;
  QStringList m_dirty;
  bool m_allDirty = true;
};

}  // namespace shardscope::ui
