// The builder's [search] editor: every setting of the [search] section (name, seed, budget,
// concurrency, timeouts, trial program, objectives, the sampler and the pruner with their
// settings) and a table of the searched fields (name, type, low, high, log, step, choices and
// a `when` condition). The settings come from one table in searcheditor.cpp, so widgets, TOML
// writing and reading cannot drift. It writes the [search] TOML that backend/sweep parses;
// opening a file fills it from that parser. Every widget's objectName is "search.<key>".
#pragma once

#include <QMap>
#include <QWidget>

#include <optional>

#include "spec/search_space.h"

class QCheckBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTableWidget;

namespace shardscope::ui {

class SearchEditor : public QWidget {
  Q_OBJECT

 public:
  enum Column { Name, Type, Low, High, Log, Step, Choices, When, ColumnCount };

  explicit SearchEditor(QWidget* parent = nullptr);

  /// Fills the widgets from [search] TOML ("" = no search); returns false (widgets unchanged)
  /// when the search parser rejects it.
  bool setToml(const QString& text);
  /// The [search] TOML the widgets describe ("" when search is off).
  QString toml() const;
  QTableWidget* table() const { return m_table; }
  /// The "search" checkbox that turns the whole section on.
  QCheckBox* enabledBox() const { return m_enabled; }
  /// Adds a row for `name` (a dotted experiment field) of `type`.
  void addParam(const QString& name, const QString& type);

  /// The setting keys, in form order: "name", "seed", ..., "sampler", "sampler.<key>",
  /// "pruner", "pruner.<key>". "sampler" and "pruner" are the type choosers.
  static QStringList settingKeys();
  /// The editor of a setting (QLineEdit, QSpinBox, QCheckBox or QComboBox), or nullptr.
  QWidget* setting(const QString& key) const { return m_settings.value(key); }
  /// The "population-based training" switch ([search.pbt] written or not) and its settings
  /// editors, objectName "search.pbt.<key>"; mutable is one checkbox per spec::kPbtMutable name
  /// ("search.pbt.mutable.<name>").
  QGroupBox* pbtBox() const { return m_pbtBox; }
  /// The text a setting's widget shows (numbers as typed, booleans "true"/"false").
  QString settingText(const QString& key) const;

 signals:
  /// The user changed something: the new [search] text.
  void edited(const QString& toml);

 private:
  QWidget* buildSettings();
  QWidget* makeEditor(int index);
  void setSettingText(const QString& key, const QString& text);
  QString tableToml() const;
  QWidget* buildPbt();
  /// [search.pbt] as the PBT widgets describe it ("" when the switch is off).
  QString pbtToml() const;
  void setPbt(const std::optional<spec::PbtConfig>& pbt);
  void updatePbtNote();
  void emitEdited();

  QCheckBox* m_enabled = nullptr;
  QTableWidget* m_table = nullptr;
  // [search.pbt]: the switch (a checkable group), a one-line summary and an editor per key.
  QGroupBox* m_pbtBox = nullptr;
  QLabel* m_pbtNote = nullptr;
  QSpinBox* m_pbtPopulation = nullptr;
  QLineEdit* m_pbtInterval = nullptr;
  QLineEdit* m_pbtQuantile = nullptr;
  QLineEdit* m_pbtFactors = nullptr;
  QLineEdit* m_pbtResample = nullptr;
  QMap<QString, QCheckBox*> m_pbtMutable;  // spec::kPbtMutable name -> its box
  QStringList m_pbtOrder;                  // the opened file's mutable order, kept on saving
  QMap<QString, QWidget*> m_settings;
  bool m_loading = false;
};

}  // namespace shardscope::ui
