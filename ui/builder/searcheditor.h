// The builder's [search] editor: sampler, pruner, trial budget, concurrency, objectives and a
// table of the searched fields (name, type, low, high, log, step, choices). It writes the
// [search] TOML that backend/search parses; opening a file fills it from that parser.
#pragma once

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLineEdit;
class QSpinBox;
class QTableWidget;

namespace shardscope::ui {

class SearchEditor : public QWidget {
  Q_OBJECT

 public:
  enum Column { Name, Type, Low, High, Log, Step, Choices, ColumnCount };

  explicit SearchEditor(QWidget* parent = nullptr);

  /// Fills the widgets from [search] TOML ("" = no search); returns false (widgets unchanged)
  /// when the search parser rejects it.
  bool setToml(const QString& text);
  /// The [search] TOML the widgets describe ("" when search is off).
  QString toml() const;
  QTableWidget* table() const { return m_table; }
  /// Adds a row for `name` (a dotted experiment field) of `type`.
  void addParam(const QString& name, const QString& type);

 signals:
  /// The user changed something: the new [search] text.
  void edited(const QString& toml);

 private:
  void emitEdited();

  QCheckBox* m_enabled = nullptr;
  QComboBox* m_sampler = nullptr;
  QComboBox* m_pruner = nullptr;
  QSpinBox* m_trials = nullptr;
  QSpinBox* m_concurrency = nullptr;
  QLineEdit* m_objectives = nullptr;
  QTableWidget* m_table = nullptr;
  bool m_loading = false;
};

}  // namespace shardscope::ui
