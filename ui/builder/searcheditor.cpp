// [search] editor: widgets <-> TOML through backend/sweep's parser.
#include "ui/builder/searcheditor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <array>
#include <limits>

#include "search/space.h"
#include "spec/search_names.h"

Q_LOGGING_CATEGORY(lcSearchEditor, "shardscope.ui.builder.search")

namespace shardscope::ui {
namespace {

// How a setting is edited and written.
enum class Kind {
  Integer,     // QSpinBox from `min`; for min/max_resource 0 means "auto" (not written)
  BigInt,      // QLineEdit holding an unsigned 64-bit integer (the seed)
  Number,      // QLineEdit holding a float
  Flag,        // QCheckBox
  Text,        // QLineEdit holding a string ("" = not written)
  List,        // QLineEdit of comma-separated strings ("" = not written)
  Objectives,  // QLineEdit of metric=minimize|maximize pairs
  Choice,      // QComboBox of the sampler or pruner types
};

QString number(double v) { return QString::number(v, 'g', QLocale::FloatingPointShortest); }
QString flag(bool v) { return v ? QStringLiteral("true") : QStringLiteral("false"); }

QString joined(const std::vector<std::string>& items) {
  QStringList out;
  for (const auto& s : items) out << QString::fromStdString(s);
  return out.join(QStringLiteral(", "));
}

QString objectivesText(const search::SearchSpace& s) {
  QStringList out;
  for (const auto& o : s.objectives) {
    out << QString::fromStdString(o.metric) +
               (o.direction == search::Direction::Minimize ? "=minimize" : "=maximize");
  }
  return out.join(QStringLiteral(", "));
}

// One [search] setting: its key (dotted below "search"), editor kind, lower bound (Integer),
// meaning for the tooltip, and how to read its value from a parsed space as the widget's text.
struct Setting {
  const char* key;
  Kind kind;
  int min;
  const char* doc;
  QString (*get)(const search::SearchSpace&);
};

using S = search::SearchSpace;
constexpr std::array<Setting, 38> kSettings = {{
    {"name", Kind::Text, 0, "study name; default: the experiment file's stem",
     [](const S& s) { return QString::fromStdString(s.name); }},
    {"seed", Kind::BigInt, 0, "sampler seed (default 0)",
     [](const S& s) { return QString::number(s.seed); }},
    {"n_trials", Kind::Integer, 1, "trials to finish (default 100)",
     [](const S& s) { return QString::number(s.n_trials); }},
    {"concurrency", Kind::Integer, 1, "trials running at once (default 1)",
     [](const S& s) { return QString::number(s.concurrency); }},
    {"timeout_s", Kind::Number, 0, "wall-clock budget in seconds; 0 = none (default)",
     [](const S& s) { return number(s.timeout_s); }},
    {"stop_grace_s", Kind::Number, 0, "seconds from SIGTERM to SIGKILL of a pruned run (30)",
     [](const S& s) { return number(s.stop_grace_s); }},
    {"retry_from_checkpoint", Kind::Flag, 0,
     "a retried trial resumes from its failed attempt's newest sharded checkpoint (true)",
     [](const S& s) { return flag(s.retry_from_checkpoint); }},
    {"on_oom", Kind::Text, 0,
     "an out-of-memory trial: replan (default; again with the same values, half the "
     "micro-batch, then checkpointing, then offload) or record (it ends oom)",
     [](const S& s) {
       return s.on_oom == spec::OnOom::record ? QStringLiteral("record") : QStringLiteral("replan");
     }},
    {"program", Kind::List, 0, "trial program argv, comma-separated; empty = shardtrain",
     [](const S& s) { return joined(s.program); }},
    {"objectives", Kind::Objectives, 0,
     "metric=minimize|maximize, comma-separated; default objective=minimize", &objectivesText},
    {"sampler", Kind::Choice, 0, "auto (default), random, grid, qmc, tpe, cmaes, nsga2 or gp",
     [](const S& s) { return QString::fromStdString(s.sampler.type); }},
    {"sampler.n_startup_trials", Kind::Integer, 0, "tpe, gp (10), cmaes (1): random trials first",
     [](const S& s) { return QString::number(s.sampler.n_startup_trials); }},
    {"sampler.n_ei_candidates", Kind::Integer, 1, "tpe: candidates per suggestion (24)",
     [](const S& s) { return QString::number(s.sampler.n_ei_candidates); }},
    {"sampler.n_ei_candidates_numeric", Kind::Integer, 0,
     "tpe: candidates for groups without a categorical (0 = n_ei_candidates)",
     [](const S& s) { return QString::number(s.sampler.n_ei_candidates_numeric); }},
    {"sampler.n_local_candidates", Kind::Integer, 0,
     "tpe: extra candidates around the best trial (8; 0 = none)",
     [](const S& s) { return QString::number(s.sampler.n_local_candidates); }},
    {"sampler.local_width", Kind::Number, 0, "tpe: their kernel widths, times l(x)'s (0.5)",
     [](const S& s) { return number(s.sampler.local_width); }},
    {"sampler.rank_weights", Kind::Flag, 0, "tpe: weigh good trials by rank in l(x) (true)",
     [](const S& s) { return flag(s.sampler.rank_weights); }},
    {"sampler.multivariate", Kind::Flag, 0, "tpe: joint estimator per group (true)",
     [](const S& s) { return flag(s.sampler.multivariate); }},
    {"sampler.group", Kind::Flag, 0, "tpe: split conditional params into groups (true)",
     [](const S& s) { return flag(s.sampler.group); }},
    {"sampler.constant_liar", Kind::Flag, 0, "tpe, gp: pending trials count as worst (true)",
     [](const S& s) { return flag(s.sampler.constant_liar); }},
    {"sampler.prior_weight", Kind::Number, 0, "tpe: weight of the prior kernel (1.0)",
     [](const S& s) { return number(s.sampler.prior_weight); }},
    {"sampler.magic_clip", Kind::Flag, 0, "tpe: lower-bound kernel widths (true)",
     [](const S& s) { return flag(s.sampler.magic_clip); }},
    {"sampler.population_size", Kind::Integer, 0, "cmaes/nsga2: 0 = automatic (default)",
     [](const S& s) { return QString::number(s.sampler.population_size); }},
    {"sampler.sigma0", Kind::Number, 0, "cmaes: initial step in the unit box; 0 = 1/6",
     [](const S& s) { return number(s.sampler.sigma0); }},
    {"sampler.crossover_prob", Kind::Number, 0, "nsga2: chance of crossover (0.9)",
     [](const S& s) { return number(s.sampler.crossover_prob); }},
    {"sampler.swapping_prob", Kind::Number, 0, "nsga2: uniform crossover swap chance (0.5)",
     [](const S& s) { return number(s.sampler.swapping_prob); }},
    {"sampler.mutation_prob", Kind::Number, 0, "nsga2: chance a value is redrawn; 0 = 1/params",
     [](const S& s) { return number(s.sampler.mutation_prob); }},
    {"pruner", Kind::Choice, 0, "none (default), median, percentile, asha or hyperband",
     [](const S& s) { return QString::fromStdString(s.pruner.type); }},
    {"pruner.percentile", Kind::Number, 0, "percentile: keep trials better than this (50)",
     [](const S& s) { return number(s.pruner.percentile); }},
    {"pruner.n_startup_trials", Kind::Integer, 0, "median/percentile: trials before pruning (5)",
     [](const S& s) { return QString::number(s.pruner.n_startup_trials); }},
    {"pruner.n_warmup_steps", Kind::Integer, 0, "median/percentile: never prune before (0)",
     [](const S& s) { return QString::number(s.pruner.n_warmup_steps); }},
    {"pruner.interval_steps", Kind::Integer, 1, "median/percentile: check every N steps (1)",
     [](const S& s) { return QString::number(s.pruner.interval_steps); }},
    {"pruner.n_min_trials", Kind::Integer, 1, "median/percentile: reports needed at a step (1)",
     [](const S& s) { return QString::number(s.pruner.n_min_trials); }},
    {"pruner.min_resource", Kind::Integer, 0, "asha/hyperband: first rung step; auto when unset",
     [](const S& s) { return QString::number(s.pruner.min_resource.value_or(0)); }},
    {"pruner.max_resource", Kind::Integer, 0, "hyperband: longest run; auto when unset",
     [](const S& s) { return QString::number(s.pruner.max_resource.value_or(0)); }},
    {"pruner.reduction_factor", Kind::Integer, 2, "asha/hyperband: keep 1/eta per rung (4)",
     [](const S& s) { return QString::number(s.pruner.reduction_factor); }},
    {"pruner.min_early_stopping_rate", Kind::Integer, 0, "asha: skip this many first rungs (0)",
     [](const S& s) { return QString::number(s.pruner.min_early_stopping_rate); }},
    {"pruner.bootstrap_count", Kind::Integer, 0, "asha: rung size before promotions (0)",
     [](const S& s) { return QString::number(s.pruner.bootstrap_count); }},
}};

static_assert(kSettings.back().key != nullptr, "kSettings lists fewer settings than its size");

/// The registered names (spec/search_names.h), in its order, with each one's summary as a tip.
template <typename Kind, std::size_t N>
void addNames(QComboBox* combo, const std::array<spec::SearchName<Kind>, N>& names) {
  for (const spec::SearchName<Kind>& n : names) {
    combo->addItem(QString::fromUtf8(n.name.data(), static_cast<qsizetype>(n.name.size())));
    combo->setItemData(
        combo->count() - 1,
        QString::fromUtf8(n.summary.data(), static_cast<qsizetype>(n.summary.size())),
        Qt::ToolTipRole);
  }
}

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

// A choice or condition value as TOML: numbers and booleans bare, anything else quoted.
QString valueToml(const QString& raw) {
  QString c = raw.trimmed();
  bool isNumber = false;
  c.toDouble(&isNumber);
  if (isNumber || c == QLatin1String("true") || c == QLatin1String("false")) return c;
  return quoted(c);
}

// A value as the table shows it: floats shortest ("0.1", not %.17g), strings raw.
QString valueText(const search::ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return number(*d);
  return QString::fromStdString(search::format_value(v));
}

// A setting's widget text as a TOML value.
QString settingToml(Kind kind, const QString& text) {
  switch (kind) {
    case Kind::Number: {
      bool ok = false;
      const double v = text.trimmed().toDouble(&ok);
      return ok ? number(v) : text.trimmed();  // garbage is left for the parser to name
    }
    case Kind::Text:
    case Kind::Choice:
      return quoted(text);
    case Kind::List: {
      QStringList items;
      for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        items << quoted(part.trimmed());
      }
      return QLatin1Char('[') + items.join(QStringLiteral(", ")) + QLatin1Char(']');
    }
    case Kind::Objectives: {
      QStringList items;
      for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        const QStringList kv = part.split(QLatin1Char('='));
        const QString dir = kv.size() > 1 ? kv[1].trimmed() : QStringLiteral("minimize");
        items << quoted(kv[0].trimmed()) + QStringLiteral(" = ") + quoted(dir);
      }
      return QStringLiteral("{ ") + items.join(QStringLiteral(", ")) + QStringLiteral(" }");
    }
    default:
      return text.trimmed();
  }
}

// The defaults the parser gives a sampler and pruner of these types (cmaes starts with one
// random trial, median fixes the percentile): a setting equal to them is not written.
search::SearchSpace defaultsFor(const QString& sampler, const QString& pruner) {
  const QString probe =
      QStringLiteral("[search]\nsampler = %1\npruner = %2\n[search.space.p]\ntype = \"bool\"\n")
          .arg(quoted(sampler), quoted(pruner));
  auto parsed = search::parse_search_space(probe.toStdString());
  return parsed ? *parsed : search::SearchSpace{};
}

}  // namespace

SearchEditor::SearchEditor(QWidget* parent) : QWidget(parent) {
  m_enabled = new QCheckBox(tr("Run a hyperparameter search over this experiment"), this);
  m_enabled->setObjectName(QStringLiteral("search.enabled"));
  m_table = new QTableWidget(0, ColumnCount, this);
  m_table->setObjectName(QStringLiteral("search.space"));
  m_table->setHorizontalHeaderLabels({tr("field"), tr("type"), tr("low"), tr("high"), tr("log"),
                                      tr("step"), tr("choices"), tr("when")});
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setToolTip(
      tr("type: float, int, categorical or bool; choices comma-separated; when: conditions "
         "PARAM=VALUE, comma-separated (the row is searched only when all hold)"));
  auto* add = new QPushButton(tr("Add parameter"), this);
  auto* remove = new QPushButton(tr("Remove"), this);
  add->setObjectName(QStringLiteral("search.add"));
  remove->setObjectName(QStringLiteral("search.remove"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add);
  buttons->addWidget(remove);
  buttons->addStretch();
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_enabled);
  layout->addWidget(buildSettings());
  layout->addWidget(buildPbt());
  layout->addWidget(m_table, 1);
  layout->addLayout(buttons);

  connect(m_enabled, &QCheckBox::toggled, this, &SearchEditor::emitEdited);
  connect(m_table, &QTableWidget::cellChanged, this, &SearchEditor::emitEdited);
  connect(add, &QPushButton::clicked, this,
          [this] { addParam(QStringLiteral("train.lr"), QStringLiteral("float")); });
  connect(remove, &QPushButton::clicked, this, [this] {
    if (m_table->currentRow() >= 0) m_table->removeRow(m_table->currentRow());
    emitEdited();
  });
  setToml(QString());
}

QStringList SearchEditor::settingKeys() {
  QStringList keys;
  for (const Setting& s : kSettings) keys << QLatin1String(s.key);
  return keys;
}

QWidget* SearchEditor::buildSettings() {
  auto* box = new QWidget(this);
  auto* row = new QHBoxLayout(box);
  row->setContentsMargins(0, 0, 0, 0);
  QFormLayout* form = nullptr;
  for (int i = 0; i < static_cast<int>(kSettings.size()); ++i) {
    const QString key = QLatin1String(kSettings[static_cast<std::size_t>(i)].key);
    if (form == nullptr || key == QLatin1String("sampler") || key == QLatin1String("pruner")) {
      const QString title = form == nullptr    ? tr("Study")
                            : key == "sampler" ? tr("Sampler")
                                               : tr("Pruner");
      auto* group = new QGroupBox(title, box);
      form = new QFormLayout(group);
      row->addWidget(group, 1);
    }
    QWidget* editor = makeEditor(i);
    const QString label = key.section(QLatin1Char('.'), -1);
    form->addRow(key.contains(QLatin1Char('.')) ? label : label + tr(" (type)"), editor);
    m_settings.insert(key, editor);
  }
  return box;
}

QWidget* SearchEditor::makeEditor(int index) {
  const Setting& s = kSettings[static_cast<std::size_t>(index)];
  QWidget* w = nullptr;
  switch (s.kind) {
    case Kind::Integer: {
      auto* spin = new QSpinBox(this);
      spin->setRange(s.min, std::numeric_limits<int>::max());
      if (QByteArray(s.key).endsWith("_resource")) spin->setSpecialValueText(tr("auto"));
      connect(spin, &QSpinBox::valueChanged, this, &SearchEditor::emitEdited);
      w = spin;
      break;
    }
    case Kind::Flag: {
      auto* box = new QCheckBox(this);
      connect(box, &QCheckBox::toggled, this, &SearchEditor::emitEdited);
      w = box;
      break;
    }
    case Kind::Choice: {
      auto* combo = new QComboBox(this);
      if (QByteArray(s.key) == "sampler") {
        addNames(combo, spec::kSamplers);
      } else {
        addNames(combo, spec::kPruners);
      }
      connect(combo, &QComboBox::currentIndexChanged, this, &SearchEditor::emitEdited);
      w = combo;
      break;
    }
    default: {
      auto* edit = new QLineEdit(this);
      if (s.kind == Kind::Objectives)
        edit->setPlaceholderText(QStringLiteral("eval.loss=minimize"));
      if (s.kind == Kind::List) edit->setPlaceholderText(tr("comma-separated"));
      connect(edit, &QLineEdit::editingFinished, this, &SearchEditor::emitEdited);
      w = edit;
      break;
    }
  }
  w->setObjectName(QStringLiteral("search.") + QLatin1String(s.key));
  w->setToolTip(QStringLiteral("<b>search.%1</b><br>%2")
                    .arg(QLatin1String(s.key), QString::fromUtf8(s.doc).toHtmlEscaped()));
  return w;
}

QString SearchEditor::settingText(const QString& key) const {
  QWidget* w = setting(key);
  if (auto* spin = qobject_cast<QSpinBox*>(w)) return QString::number(spin->value());
  if (auto* box = qobject_cast<QCheckBox*>(w)) return flag(box->isChecked());
  if (auto* combo = qobject_cast<QComboBox*>(w)) return combo->currentText();
  if (auto* edit = qobject_cast<QLineEdit*>(w)) return edit->text();
  return {};
}

void SearchEditor::setSettingText(const QString& key, const QString& text) {
  QWidget* w = setting(key);
  if (auto* spin = qobject_cast<QSpinBox*>(w)) {
    spin->setValue(text.toInt());
  } else if (auto* box = qobject_cast<QCheckBox*>(w)) {
    box->setChecked(text == QLatin1String("true"));
  } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
    combo->setCurrentText(text);
  } else if (auto* edit = qobject_cast<QLineEdit*>(w)) {
    edit->setText(text);
  }
}

void SearchEditor::addParam(const QString& name, const QString& type) {
  const QSignalBlocker block(m_table);
  const int row = m_table->rowCount();
  m_table->insertRow(row);
  const QStringList cells = {name, type, "1e-5", "1e-2", "true", "", "", ""};
  for (int c = 0; c < ColumnCount; ++c) m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
  m_enabled->setChecked(true);
  emitEdited();
}

void SearchEditor::emitEdited() {
  if (m_pbtNote != nullptr) updatePbtNote();
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
  setPbt(space.pbt);
  for (const Setting& s : kSettings) setSettingText(QLatin1String(s.key), s.get(space));
  m_table->setRowCount(0);
  for (const auto& p : space.params) {
    const int row = m_table->rowCount();
    m_table->insertRow(row);
    QStringList choices;
    for (const auto& c : p.choices) choices << valueText(c);
    QStringList when;
    for (const auto& c : p.when) when << QString::fromStdString(c.param) + "=" + valueText(c.value);
    const bool numeric = p.numeric();
    const QStringList cells = {
        QString::fromStdString(p.name),
        typeName(p.type),
        numeric ? number(p.low) : QString(),
        numeric ? number(p.high) : QString(),
        numeric ? flag(p.log) : QString(),
        numeric && p.step > 0 ? number(p.step) : QString(),
        p.type == search::ParamType::Categorical ? choices.join(", ") : QString(),
        when.join(QStringLiteral(", "))};
    for (int c = 0; c < ColumnCount; ++c) m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
  }
  m_loading = false;
  return true;
}

QString SearchEditor::toml() const {
  if (!m_enabled->isChecked()) return {};
  const search::SearchSpace defaults =
      defaultsFor(settingText(QStringLiteral("sampler")), settingText(QStringLiteral("pruner")));
  QString out = QStringLiteral("[search]\n");
  QStringList sampler;
  QStringList pruner;
  for (const Setting& s : kSettings) {
    const QString key = QLatin1String(s.key);
    const QString value = settingToml(s.kind, settingText(key));
    const bool always = key == "n_trials" || key == "concurrency";
    const bool type = s.kind == Kind::Choice;
    if (!always && !type && value == settingToml(s.kind, s.get(defaults))) continue;
    if (!type && s.kind != Kind::Integer && s.kind != Kind::Flag &&
        settingText(key).trimmed().isEmpty())
      continue;  // an emptied field means "the default"
    if (key.startsWith(QLatin1String("sampler"))) {
      sampler << (type ? QStringLiteral("type") : key.mid(8)) + QStringLiteral(" = ") + value;
    } else if (key.startsWith(QLatin1String("pruner"))) {
      pruner << (type ? QStringLiteral("type") : key.mid(7)) + QStringLiteral(" = ") + value;
    } else {
      out += key + QStringLiteral(" = ") + value + QLatin1Char('\n');
    }
  }
  for (const auto& [name, items] : {std::pair<QString, QStringList>{"sampler", sampler},
                                    std::pair<QString, QStringList>{"pruner", pruner}}) {
    // Only the type: the short form `sampler = "tpe"`; with settings an inline table.
    const QString value = items.size() == 1
                              ? items.first().section(QStringLiteral(" = "), 1)
                              : QStringLiteral("{ ") + items.join(", ") + QStringLiteral(" }");
    out += name + QStringLiteral(" = ") + value + QLatin1Char('\n');
  }
  out += tableToml();
  out += pbtToml();
  return out;
}

QWidget* SearchEditor::buildPbt() {
  m_pbtBox = new QGroupBox(tr("Population-based training ([search.pbt])"), this);
  m_pbtBox->setObjectName(QStringLiteral("search.pbt.enabled"));
  m_pbtBox->setCheckable(true);
  m_pbtBox->setChecked(false);
  m_pbtBox->setToolTip(
      tr("<b>search.pbt</b><br>Train search.pbt.population trials side by side in segments; after "
         "each, the bottom quantile go on from a top trial's sharded checkpoint with perturbed "
         "values (the sampler and n_trials are then not used; docs/config.md)"));
  auto* form = new QFormLayout(m_pbtBox);
  m_pbtNote = new QLabel(m_pbtBox);
  m_pbtNote->setObjectName(QStringLiteral("search.pbt"));
  m_pbtNote->setWordWrap(true);
  form->addRow(m_pbtNote);
  const auto named = [](QWidget* w, const char* key, const QString& doc) {
    w->setObjectName(QStringLiteral("search.pbt.") + QLatin1String(key));
    w->setToolTip(QStringLiteral("<b>search.pbt.%1</b><br>%2").arg(QLatin1String(key), doc));
    return w;
  };
  m_pbtPopulation = new QSpinBox(m_pbtBox);
  m_pbtPopulation->setRange(2, std::numeric_limits<int>::max());
  form->addRow(tr("population"),
               named(m_pbtPopulation, "population", tr("trials trained side by side (>= 2)")));
  m_pbtInterval = new QLineEdit(m_pbtBox);
  m_pbtInterval->setPlaceholderText(tr("required, e.g. 100"));
  form->addRow(tr("interval_steps"),
               named(m_pbtInterval, "interval_steps",
                     tr("optimizer steps per segment (>= 1; train.max_steps a multiple of it)")));
  m_pbtQuantile = new QLineEdit(m_pbtBox);
  form->addRow(tr("quantile"),
               named(m_pbtQuantile, "quantile",
                     tr("the bottom and top fraction of the population, in (0, 0.5]")));
  m_pbtFactors = new QLineEdit(m_pbtBox);
  m_pbtFactors->setPlaceholderText(tr("comma-separated, e.g. 0.8, 1.2"));
  form->addRow(tr("factors"), named(m_pbtFactors, "factors",
                                    tr("explore: a mutable value times one of these (> 0)")));
  auto* mutables = new QWidget(m_pbtBox);
  auto* row = new QHBoxLayout(mutables);
  row->setContentsMargins(0, 0, 0, 0);
  for (const std::string_view name : spec::kPbtMutable) {  // spec's one list of them
    const QString param = QString::fromUtf8(name.data(), qsizetype(name.size()));
    auto* box = new QCheckBox(param, mutables);
    box->setObjectName(QStringLiteral("search.pbt.mutable.") + param);
    box->setToolTip(
        tr("<b>search.pbt.mutable</b><br>%1 may change between segments (it must also be a "
           "numeric parameter of the space)")
            .arg(param));
    connect(box, &QCheckBox::toggled, this, &SearchEditor::emitEdited);
    row->addWidget(box);
    m_pbtMutable.insert(param, box);
  }
  row->addStretch();
  form->addRow(tr("mutable"), mutables);
  m_pbtResample = new QLineEdit(m_pbtBox);
  form->addRow(tr("resample_probability"),
               named(m_pbtResample, "resample_probability",
                     tr("explore: the chance to draw a value again from its range instead, in "
                        "[0, 1]")));
  connect(m_pbtBox, &QGroupBox::toggled, this, &SearchEditor::emitEdited);
  connect(m_pbtPopulation, &QSpinBox::valueChanged, this, &SearchEditor::emitEdited);
  for (QLineEdit* edit : {m_pbtInterval, m_pbtQuantile, m_pbtFactors, m_pbtResample})
    connect(edit, &QLineEdit::editingFinished, this, &SearchEditor::emitEdited);
  return m_pbtBox;
}

void SearchEditor::setPbt(const std::optional<spec::PbtConfig>& pbt) {
  // Off: the defaults spec gives, so switching it on starts from them.
  const spec::PbtConfig c = pbt.value_or(spec::PbtConfig{});
  m_pbtBox->setChecked(pbt.has_value());
  m_pbtPopulation->setValue(c.population);
  m_pbtInterval->setText(c.interval_steps > 0 ? QString::number(c.interval_steps) : QString());
  m_pbtQuantile->setText(number(c.quantile));
  QStringList factors;
  for (const double f : c.factors) factors << number(f);
  m_pbtFactors->setText(factors.join(QStringLiteral(", ")));
  for (auto it = m_pbtMutable.begin(); it != m_pbtMutable.end(); ++it) {
    it.value()->setChecked(std::find(c.mutable_params.begin(), c.mutable_params.end(),
                                     it.key().toStdString()) != c.mutable_params.end());
  }
  m_pbtResample->setText(number(c.resample_probability));
  m_pbtOrder.clear();
  for (const auto& m : c.mutable_params) m_pbtOrder << QString::fromStdString(m);
  updatePbtNote();
}

void SearchEditor::updatePbtNote() {
  QStringList mutables;
  for (auto it = m_pbtMutable.cbegin(); it != m_pbtMutable.cend(); ++it)
    if (it.value()->isChecked()) mutables << it.key();
  m_pbtNote->setText(tr("%1 members, segments of %2 steps, changing %3")
                         .arg(m_pbtPopulation->value())
                         .arg(m_pbtInterval->text().trimmed().isEmpty()
                                  ? QStringLiteral("?")
                                  : m_pbtInterval->text().trimmed())
                         .arg(mutables.isEmpty() ? tr("nothing yet") : mutables.join(", ")));
  m_pbtNote->setVisible(m_pbtBox->isChecked());
  // PBT draws its first values from the seed and runs population x segments trials: the sampler
  // and n_trials are not used (kept, and written, for when it is switched off).
  for (auto it = m_settings.cbegin(); it != m_settings.cend(); ++it) {
    if (it.key().startsWith(QLatin1String("sampler")) || it.key() == QLatin1String("n_trials"))
      it.value()->setEnabled(!m_pbtBox->isChecked());
  }
}

// Each key as its widget has it, in spec's order; an emptied field is left out (the parser then
// names a required one, or takes the default).
QString SearchEditor::pbtToml() const {
  if (!m_pbtBox->isChecked()) return {};
  QString out = QStringLiteral("\n[search.pbt]\npopulation = %1\n").arg(m_pbtPopulation->value());
  const auto line = [&out](const char* key, const QString& value) {
    if (!value.isEmpty()) out += QLatin1String(key) + QStringLiteral(" = ") + value + '\n';
  };
  line("interval_steps", m_pbtInterval->text().trimmed());
  line("quantile", m_pbtQuantile->text().trimmed());
  QStringList factors;
  for (const QString& f : m_pbtFactors->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
    factors << f.trimmed();
  if (!factors.isEmpty()) line("factors", QStringLiteral("[%1]").arg(factors.join(", ")));
  // The opened file's order first (a round trip changes nothing), then spec's.
  QStringList order = m_pbtOrder;
  for (const std::string_view name : spec::kPbtMutable) {
    const QString param = QString::fromUtf8(name.data(), qsizetype(name.size()));
    if (!order.contains(param)) order << param;
  }
  QStringList mutables;
  for (const QString& param : std::as_const(order)) {
    const QCheckBox* box = m_pbtMutable.value(param);
    if (box != nullptr && box->isChecked()) mutables << quoted(param);
  }
  line("mutable", QStringLiteral("[%1]").arg(mutables.join(", ")));
  line("resample_probability", m_pbtResample->text().trimmed());
  return out;
}

QString SearchEditor::tableToml() const {
  auto cell = [this](int r, int c) {
    const auto* item = m_table->item(r, c);
    return item ? item->text().trimmed() : QString();
  };
  QString out;
  for (int r = 0; r < m_table->rowCount(); ++r) {
    const QString type = cell(r, Type);
    out +=
        QStringLiteral("\n[search.space.%1]\ntype = %2\n").arg(quoted(cell(r, Name)), quoted(type));
    if (type == QLatin1String("categorical")) {
      QStringList items;
      for (const QString& c : cell(r, Choices).split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        items << valueToml(c);
      }
      out += QStringLiteral("choices = [%1]\n").arg(items.join(QStringLiteral(", ")));
    } else if (type != QLatin1String("bool")) {
      out += QStringLiteral("low = %1\nhigh = %2\n").arg(cell(r, Low), cell(r, High));
      if (cell(r, Log) == QLatin1String("true")) out += QStringLiteral("log = true\n");
      if (!cell(r, Step).isEmpty()) out += QStringLiteral("step = %1\n").arg(cell(r, Step));
    }
    QStringList when;
    for (const QString& c : cell(r, When).split(QLatin1Char(','), Qt::SkipEmptyParts)) {
      const QString param = c.section(QLatin1Char('='), 0, 0).trimmed();
      when << quoted(param) + QStringLiteral(" = ") + valueToml(c.section(QLatin1Char('='), 1));
    }
    if (!when.isEmpty()) out += QStringLiteral("when = { %1 }\n").arg(when.join(", "));
  }
  return out;
}

}  // namespace shardscope::ui
