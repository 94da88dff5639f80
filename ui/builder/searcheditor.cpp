// [search] editor: widgets <-> TOML through backend/search's parser.
#include "ui/builder/searcheditor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include "backend/search/space.h"

Q_LOGGING_CATEGORY(lcSearchEditor, "shardscope.ui.builder.search")

namespace shardscope::ui {
namespace {

QString typeName(search::ParamType t) {
  switch (t) {
    case search::ParamType::Float:
      return QStringLiteral("float");
    case search::ParamType::Int:
      return QStringLiteral("int");
    case search::ParamType::Categorical:
      return QStringLiteral("categorical");
    case search::ParamType::Bool:
      return QStringLiteral("bool");
  }
  return QStringLiteral("float");
}

QString quoted(const QString& s) {
  QString out = s;
  out.replace(QLatin1Char('\\'), QStringLiteral("\\\\"))
      .replace(QLatin1Char('"'), QStringLiteral("\\\""));
  return QLatin1Char('"') + out + QLatin1Char('"');
}

// A choice as TOML: numbers and booleans bare, anything else quoted.
QString choiceToml(const QString& raw) {
  QString c = raw.trimmed();
  bool number = false;
  c.toDouble(&number);
  if (number || c == QLatin1String("true") || c == QLatin1String("false")) return c;
  return quoted(c);
}

}  // namespace

SearchEditor::SearchEditor(QWidget* parent) : QWidget(parent) {
  m_enabled = new QCheckBox(tr("Run a hyperparameter search over this experiment"), this);
  m_sampler = new QComboBox(this);
  m_sampler->addItems({"tpe", "random", "grid", "qmc", "cmaes", "nsga2"});
  m_pruner = new QComboBox(this);
  m_pruner->addItems({"none", "median", "percentile", "asha", "hyperband"});
  m_trials = new QSpinBox(this);
  m_trials->setRange(1, 1'000'000);
  m_trials->setValue(100);
  m_concurrency = new QSpinBox(this);
  m_concurrency->setRange(1, 4096);
  m_objectives = new QLineEdit(this);
  m_objectives->setPlaceholderText(QStringLiteral("eval.loss=minimize"));
  m_objectives->setToolTip(
      tr("metric=minimize|maximize, comma-separated; default objective=minimize"));
  m_table = new QTableWidget(0, ColumnCount, this);
  m_table->setHorizontalHeaderLabels(
      {tr("field"), tr("type"), tr("low"), tr("high"), tr("log"), tr("step"), tr("choices")});
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setToolTip(tr("type: float, int, categorical or bool; choices comma-separated"));
  auto* add = new QPushButton(tr("Add parameter"), this);
  auto* remove = new QPushButton(tr("Remove"), this);
  auto* form = new QFormLayout;
  form->addRow(m_enabled);
  form->addRow(tr("sampler"), m_sampler);
  form->addRow(tr("pruner"), m_pruner);
  form->addRow(tr("n_trials"), m_trials);
  form->addRow(tr("concurrency"), m_concurrency);
  form->addRow(tr("objectives"), m_objectives);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add);
  buttons->addWidget(remove);
  buttons->addStretch();
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(m_table, 1);
  layout->addLayout(buttons);

  connect(m_enabled, &QCheckBox::toggled, this, &SearchEditor::emitEdited);
  connect(m_sampler, &QComboBox::currentIndexChanged, this, &SearchEditor::emitEdited);
  connect(m_pruner, &QComboBox::currentIndexChanged, this, &SearchEditor::emitEdited);
  connect(m_trials, &QSpinBox::valueChanged, this, &SearchEditor::emitEdited);
  connect(m_concurrency, &QSpinBox::valueChanged, this, &SearchEditor::emitEdited);
  connect(m_objectives, &QLineEdit::editingFinished, this, &SearchEditor::emitEdited);
  connect(m_table, &QTableWidget::cellChanged, this, &SearchEditor::emitEdited);
  connect(add, &QPushButton::clicked, this,
          [this] { addParam(QStringLiteral("train.lr"), QStringLiteral("float")); });
  connect(remove, &QPushButton::clicked, this, [this] {
    if (m_table->currentRow() >= 0) m_table->removeRow(m_table->currentRow());
    emitEdited();
  });
}

void SearchEditor::addParam(const QString& name, const QString& type) {
  const QSignalBlocker block(m_table);
  const int row = m_table->rowCount();
  m_table->insertRow(row);
  const QStringList cells = {name, type, "1e-5", "1e-2", "true", "", ""};
  for (int c = 0; c < ColumnCount; ++c) m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
  m_enabled->setChecked(true);
  emitEdited();
}

void SearchEditor::emitEdited() {
  if (!m_loading) emit edited(toml());
}

bool SearchEditor::setToml(const QString& text) {
  search::SearchSpace space;
  if (!text.trimmed().isEmpty()) {
    auto parsed = search::parse_search_space(text.toStdString());
    if (!parsed) {
      qCDebug(lcSearchEditor) << "kept the widgets:" << parsed.message().c_str();
      return false;
    }
    space = std::move(*parsed);
  }
  m_loading = true;
  m_enabled->setChecked(!text.trimmed().isEmpty());
  m_sampler->setCurrentText(QString::fromStdString(space.sampler.type));
  m_pruner->setCurrentText(QString::fromStdString(space.pruner.type));
  m_trials->setValue(static_cast<int>(space.n_trials));
  m_concurrency->setValue(space.concurrency);
  QStringList objectives;
  for (const auto& o : space.objectives) {
    objectives << QString::fromStdString(o.metric) +
                      (o.direction == search::Direction::Minimize ? "=minimize" : "=maximize");
  }
  m_objectives->setText(objectives.join(QStringLiteral(", ")));
  m_table->setRowCount(0);
  for (const auto& p : space.params) {
    const int row = m_table->rowCount();
    m_table->insertRow(row);
    QStringList choices;
    for (const auto& c : p.choices) choices << QString::fromStdString(search::format_value(c));
    const bool numeric = p.numeric();
    const QStringList cells = {
        QString::fromStdString(p.name),
        typeName(p.type),
        numeric ? QString::number(p.low) : QString(),
        numeric ? QString::number(p.high) : QString(),
        numeric ? (p.log ? "true" : "false") : QString(),
        numeric && p.step > 0 ? QString::number(p.step) : QString(),
        p.type == search::ParamType::Categorical ? choices.join(", ") : QString()};
    for (int c = 0; c < ColumnCount; ++c) m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
  }
  m_loading = false;
  return true;
}

QString SearchEditor::toml() const {
  if (!m_enabled->isChecked()) return {};
  QString out = QStringLiteral("[search]\n");
  out += QStringLiteral("sampler = %1\n").arg(quoted(m_sampler->currentText()));
  out += QStringLiteral("pruner = %1\n").arg(quoted(m_pruner->currentText()));
  out += QStringLiteral("n_trials = %1\nconcurrency = %2\n")
             .arg(m_trials->value())
             .arg(m_concurrency->value());
  QStringList objectives;
  for (const QString& part : m_objectives->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    const QStringList kv = part.split(QLatin1Char('='));
    const QString dir = kv.size() > 1 ? kv[1].trimmed() : QStringLiteral("minimize");
    objectives << quoted(kv[0].trimmed()) + QStringLiteral(" = ") + quoted(dir);
  }
  if (!objectives.isEmpty()) {
    out += QStringLiteral("objectives = { %1 }\n").arg(objectives.join(QStringLiteral(", ")));
  }
  auto cell = [this](int r, int c) {
    const auto* item = m_table->item(r, c);
    return item ? item->text().trimmed() : QString();
  };
  for (int r = 0; r < m_table->rowCount(); ++r) {
    const QString type = cell(r, Type);
    out +=
        QStringLiteral("\n[search.space.%1]\ntype = %2\n").arg(quoted(cell(r, Name)), quoted(type));
    if (type == QLatin1String("categorical")) {
      QStringList items;
      for (const QString& c : cell(r, Choices).split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        items << choiceToml(c);
      }
      out += QStringLiteral("choices = [%1]\n").arg(items.join(QStringLiteral(", ")));
    } else if (type != QLatin1String("bool")) {
      out += QStringLiteral("low = %1\nhigh = %2\n").arg(cell(r, Low), cell(r, High));
      if (cell(r, Log) == QLatin1String("true")) out += QStringLiteral("log = true\n");
      if (!cell(r, Step).isEmpty()) out += QStringLiteral("step = %1\n").arg(cell(r, Step));
    }
  }
  return out;
}

}  // namespace shardscope::ui
