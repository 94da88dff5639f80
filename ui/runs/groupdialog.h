// GroupDialog: "Add to group" of the runs table: a new group's name typed, or an existing group
// picked (an editable combo listing the run log's groups). The name is checked as it is typed
// (backend::checkGroupName) and OK stays disabled, with the reason shown, while it is wrong. Opens
// window-modal and non-blocking (QDialog::open): the panel acts on accepted().
#pragma once

#include <QDialog>
#include <QStringList>

class QComboBox;
class QDialogButtonBox;
class QLabel;

namespace shardscope::ui {

class GroupDialog : public QDialog {
  Q_OBJECT

 public:
  /// `runCount`: how many runs go into the group; `known`: the run log's groups.
  GroupDialog(int runCount, const QStringList& known, QWidget* parent = nullptr);

  QComboBox* nameBox() const { return m_name; }
  QLabel* errorLabel() const { return m_error; }
  QDialogButtonBox* buttons() const { return m_buttons; }
  /// The group's name as typed or picked.
  QString name() const;

 private:
  void check();

  QComboBox* m_name = nullptr;
  QLabel* m_error = nullptr;
  QDialogButtonBox* m_buttons = nullptr;
};

}  // namespace shardscope::ui
