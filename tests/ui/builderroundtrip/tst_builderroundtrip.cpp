// The builder round trip, offscreen, through the widgets:
//  a. every field of every section, the [search] settings and its space table (float log, int
//     step, categorical, bool, `when` conditions), objectives, sampler and pruner, entered as a
//     user does (keys into line edits and spin boxes, arrow keys in combo boxes, space on check
//     boxes, typing into the table's cell editors), saved through the builder's save path, parse
//     back field by field equal to the hand-written fixture full.toml;
//  b. opening full.toml sets every widget to the fixture's value.
// Values typed here are written by hand, independently of full.toml: the two files are two
// statements of the same experiment, and the comparison names each field where they disagree.
#include <QtTest>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>

#include <functional>

#include "search/space.h"
#include "spec/field_catalog.h"
#include "tests/support/paths.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/builder/searcheditor.h"

using namespace shardscope;
using shardscope::ui::BuilderPanel;
using shardscope::ui::SearchEditor;

namespace {

const QString kFixture = shardscope::testing::sourceDir() + "/tests/ui/builderroundtrip/full.toml";

// What the user enters in each field's widget (lists and maps as the widget shows them).
const QMap<QString, QString> kTyped = {
    {"experiment.name", "roundtrip-vqa"},
    {"experiment.description", "Every field set by hand for the builder round trip"},
    {"model.arch", "qwen2_vl"},
    {"model.path", "/srv/models/qwen2-vl-2b"},
    {"model.tiny_vocab_size", "512"},
    {"model.tiny_hidden_size", "96"},
    {"model.tiny_layers", "3"},
    {"model.tiny_heads", "6"},
    {"model.tiny_intermediate_size", "200"},
    {"model.tiny_max_seq_len", "1024"},
    {"data.train_path", "/srv/data/vqa/train.jsonl"},
    {"data.eval_path", "/srv/data/vqa/eval.jsonl"},
    {"data.format", "chat"},
    {"data.seq_len", "384"},
    {"data.shuffle", "false"},
    {"data.blank_images", "true"},
    {"data.pack", "false"},
    {"train.max_steps", "1234"},
    {"train.batch_size", "48"},
    {"train.micro_batch_size", "6"},
    {"train.lr", "2.5e-5"},
    {"train.lr_min", "1e-6"},
    {"train.lr_warmup_steps", "40"},
    {"train.lr_schedule", "linear"},
    {"train.weight_decay", "0.05"},
    {"train.adam_beta1", "0.85"},
    {"train.adam_beta2", "0.98"},
    {"train.adam_eps", "1e-6"},
    {"train.grad_clip", "0.5"},
    {"train.seed", "987654321"},
    {"train.deterministic", "true"},
    {"train.log_every", "5"},
    {"train.mem_every", "25"},
    {"train.ckpt_every", "200"},
    {"train.ckpt_keep", "3"},
    {"train.ckpt_at_end", "false"},
    {"train.threads", "3"},
    {"train.loss_chunk_tokens", "256"},
    {"train.freeze", "model.embed_tokens.*, visual.blocks.[0-3].*"},
    {"shard.strategy", "HYBRID_SHARD"},
    {"shard.wrap_policy", "size"},
    {"shard.wrap_min_params", "50000000"},
    {"shard.backward_prefetch", "post"},
    {"shard.forward_prefetch", "true"},
    {"shard.max_inflight_gathers", "4"},
    {"shard.precision", "custom"},
    {"shard.param_dtype", "bf16"},
    {"shard.reduce_dtype", "fp16"},
    {"shard.buffer_dtype", "bf16"},
    {"shard.offload_params", "true"},
    {"shard.offload_optimizer", "true"},
    {"shard.activation_checkpointing", "true"},
    {"shard.reduce_every_microstep", "true"},
    {"shard.device", "cuda"},
    {"shard.backend", "gloo"},
    {"shard.allow_tf32", "true"},
    {"shard.timeout_s", "900"},
    {"lora.enabled", "true"},
    {"lora.r", "16"},
    {"lora.alpha", "32"},
    {"lora.dropout", "0.05"},
    {"lora.target_modules", "q_proj, v_proj, gate_proj"},
    {"lora.quantize", "nf4"},
    {"lora.double_quant", "false"},
    {"lora.quant_block_size", "128"},
    {"lora.quant_storage", "bfloat16"},
    {"eval.every", "50"},
    {"eval.batches", "8"},
    {"eval.metrics", "loss, accuracy, exact_match"},
    {"eval.max_new_tokens", "32"},
    {"eval.do_sample", "true"},
    {"eval.temperature", "0.7"},
    {"eval.top_p", "0.9"},
    {"eval.probes", "/srv/data/vqa/probes.jsonl"},
    {"eval.probe_max_new_tokens", "48"},
    {"trace.every_n_steps", "100"},
    {"trace.max_mib", "32"},
    {"trace.memory_on_oom", "true"},
    {"launch.kind", "slurm"},
    {"launch.nnodes", "2"},
    {"launch.nproc_per_node", "4"},
    {"launch.threads_per_rank", "2"},
    {"launch.gpus", "0, 1, 2, 3"},
    {"launch.hosts", "gpu1, gpu2"},
    {"launch.remote_dir", "/scratch/shardscope-runs"},
    {"launch.trainer", "/opt/shardscope/bin/shardtrain"},
    {"launch.env", "HF_HOME=/scratch/hf, NCCL_DEBUG=INFO"},
    {"launch.grace_s", "20"},
    {"launch.device_memory_gib", "79.5"},
    {"launch.slurm_partition", "gpu"},
    {"launch.slurm_account", "ml-team"},
    {"launch.slurm_time", "1-02:00:00"},
    {"launch.slurm_gpus_per_node", "4"},
    {"launch.slurm_extra", "--exclusive, --mem=0"},
    {"launch.slurm_host", "login1"},
    {"notify.on_end", "notify-send \"run ended\""},
    {"notify.on_stall", "/opt/hooks/stall.sh"},
    {"notify.on_sweep_end", "/opt/hooks/sweep-done.sh --chat ml-team"},
    {"notify.stall_after_min", "12.5"},
};

// The [search] settings the user enters (SearchEditor::settingKeys()).
const QMap<QString, QString> kSearchTyped = {
    {"name", "roundtrip-study"},
    {"seed", "42"},
    {"n_trials", "64"},
    {"concurrency", "4"},
    {"timeout_s", "7200"},
    {"stop_grace_s", "12.5"},
    {"retry_from_checkpoint", "false"},
    {"on_oom", "record"},
    {"program", "python3, objective.py"},
    {"objectives", "eval.accuracy=maximize, eval.loss=minimize"},
    {"sampler", "nsga2"},
    {"sampler.n_startup_trials", "7"},
    {"sampler.n_ei_candidates", "48"},
    {"sampler.n_ei_candidates_numeric", "40"},
    {"sampler.n_local_candidates", "4"},
    {"sampler.local_width", "0.25"},
    {"sampler.rank_weights", "false"},
    {"sampler.multivariate", "false"},
    {"sampler.group", "false"},
    {"sampler.constant_liar", "false"},
    {"sampler.prior_weight", "2"},
    {"sampler.magic_clip", "false"},
    {"sampler.population_size", "20"},
    {"sampler.sigma0", "0.25"},
    {"sampler.crossover_prob", "0.8"},
    {"sampler.swapping_prob", "0.4"},
    {"sampler.mutation_prob", "0.1"},
    {"pruner", "asha"},
    {"pruner.percentile", "25"},
    {"pruner.n_startup_trials", "3"},
    {"pruner.n_warmup_steps", "10"},
    {"pruner.interval_steps", "2"},
    {"pruner.n_min_trials", "2"},
    {"pruner.min_resource", "5"},
    {"pruner.max_resource", "400"},
    {"pruner.reduction_factor", "3"},
    {"pruner.min_early_stopping_rate", "1"},
    {"pruner.bootstrap_count", "2"},
};

// The space table as the user fills it: field, type, low, high, log, step, choices, when.
const QList<QStringList> kRows = {
    {"train.lr", "float", "1e-5", "1e-2", "true", "", "", ""},
    {"train.batch_size", "int", "16", "64", "false", "16", "", ""},
    {"train.lr_schedule", "categorical", "", "", "", "", "cosine, linear, constant", ""},
    {"shard.max_inflight_gathers", "categorical", "", "", "", "", "1, 2, 4", ""},
    {"lora.enabled", "bool", "", "", "", "", "", ""},
    {"lora.r", "int", "4", "32", "false", "4", "", "lora.enabled=true"},
    {"lora.dropout", "float", "0", "0.2", "false", "0.05", "", "lora.enabled=true"},
};

// ---- comparison ---------------------------------------------------------------------------

// Every catalog field whose value differs, as "path: A != B".
QStringList experimentDiffs(const spec::Experiment& a, const spec::Experiment& b) {
  QStringList diffs;
  for (const auto& f : spec::field_catalog()) {
    const auto x = spec::get_field(a, f.path);
    const auto y = spec::get_field(b, f.path);
    if (!x || !y || *x != *y) {
      diffs << QStringLiteral("%1: %2 != %3")
                   .arg(QString::fromStdString(f.path), QString::fromStdString(x ? *x : "?"),
                        QString::fromStdString(y ? *y : "?"));
    }
  }
  return diffs;
}

QString text(double v) { return QString::number(v, 'g', 17); }

QString valueText(const search::ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return "f" + text(*d);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return "i" + QString::number(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return "s" + QString::fromStdString(std::get<std::string>(v));
}

QString paramText(const search::Param& p) {
  QStringList choices;
  for (const auto& c : p.choices) choices << valueText(c);
  QStringList when;
  for (const auto& c : p.when) when << QString::fromStdString(c.param) + "=" + valueText(c.value);
  return QStringLiteral("type %1 low %2 high %3 log %4 step %5 choices [%6] when [%7]")
      .arg(int(p.type))
      .arg(text(p.low), text(p.high))
      .arg(int(p.log))
      .arg(text(p.step), choices.join(','), when.join(','));
}

// Every member of a parsed [search] section, by name, as text (exact: doubles with 17 digits).
using SearchGetter = std::function<QString(const search::SearchSpace&)>;
const QList<QPair<QString, SearchGetter>>& searchMembers() {
  using S = search::SearchSpace;
  static const QList<QPair<QString, SearchGetter>> members = {
      {"name", [](const S& s) { return QString::fromStdString(s.name); }},
      {"seed", [](const S& s) { return QString::number(s.seed); }},
      {"n_trials", [](const S& s) { return QString::number(s.n_trials); }},
      {"timeout_s", [](const S& s) { return text(s.timeout_s); }},
      {"concurrency", [](const S& s) { return QString::number(s.concurrency); }},
      {"stop_grace_s", [](const S& s) { return text(s.stop_grace_s); }},
      {"retry_from_checkpoint",
       [](const S& s) { return QString::number(s.retry_from_checkpoint); }},
      {"on_oom", [](const S& s) { return QString::number(int(s.on_oom)); }},
      {"objectives",
       [](const S& s) {
         QStringList o;
         for (const auto& x : s.objectives)
           o << QString::fromStdString(x.metric) + "/" + QString::number(int(x.direction));
         return o.join(',');
       }},
      {"program",
       [](const S& s) {
         QStringList o;
         for (const auto& x : s.program) o << QString::fromStdString(x);
         return o.join('|');
       }},
      {"sampler.type", [](const S& s) { return QString::fromStdString(s.sampler.type); }},
      {"sampler.n_startup_trials",
       [](const S& s) { return QString::number(s.sampler.n_startup_trials); }},
      {"sampler.n_ei_candidates",
       [](const S& s) { return QString::number(s.sampler.n_ei_candidates); }},
      {"sampler.n_ei_candidates_numeric",
       [](const S& s) { return QString::number(s.sampler.n_ei_candidates_numeric); }},
      {"sampler.n_local_candidates",
       [](const S& s) { return QString::number(s.sampler.n_local_candidates); }},
      {"sampler.local_width", [](const S& s) { return text(s.sampler.local_width); }},
      {"sampler.rank_weights", [](const S& s) { return QString::number(s.sampler.rank_weights); }},
      {"sampler.multivariate", [](const S& s) { return QString::number(s.sampler.multivariate); }},
      {"sampler.group", [](const S& s) { return QString::number(s.sampler.group); }},
      {"sampler.constant_liar",
       [](const S& s) { return QString::number(s.sampler.constant_liar); }},
      {"sampler.prior_weight", [](const S& s) { return text(s.sampler.prior_weight); }},
      {"sampler.magic_clip", [](const S& s) { return QString::number(s.sampler.magic_clip); }},
      {"sampler.population_size",
       [](const S& s) { return QString::number(s.sampler.population_size); }},
      {"sampler.sigma0", [](const S& s) { return text(s.sampler.sigma0); }},
      {"sampler.crossover_prob", [](const S& s) { return text(s.sampler.crossover_prob); }},
      {"sampler.swapping_prob", [](const S& s) { return text(s.sampler.swapping_prob); }},
      {"sampler.mutation_prob", [](const S& s) { return text(s.sampler.mutation_prob); }},
      {"pruner.type", [](const S& s) { return QString::fromStdString(s.pruner.type); }},
      {"pruner.percentile", [](const S& s) { return text(s.pruner.percentile); }},
      {"pruner.n_startup_trials",
       [](const S& s) { return QString::number(s.pruner.n_startup_trials); }},
      {"pruner.n_warmup_steps",
       [](const S& s) { return QString::number(s.pruner.n_warmup_steps); }},
      {"pruner.interval_steps",
       [](const S& s) { return QString::number(s.pruner.interval_steps); }},
      {"pruner.n_min_trials", [](const S& s) { return QString::number(s.pruner.n_min_trials); }},
      {"pruner.min_resource",
       [](const S& s) { return QString::number(s.pruner.min_resource.value_or(-1)); }},
      {"pruner.max_resource",
       [](const S& s) { return QString::number(s.pruner.max_resource.value_or(-1)); }},
      {"pruner.reduction_factor",
       [](const S& s) { return QString::number(s.pruner.reduction_factor); }},
      {"pruner.min_early_stopping_rate",
       [](const S& s) { return QString::number(s.pruner.min_early_stopping_rate); }},
      {"pruner.bootstrap_count",
       [](const S& s) { return QString::number(s.pruner.bootstrap_count); }},
      {"space",
       [](const S& s) {
         QStringList names;
         for (const auto& p : s.params) names << QString::fromStdString(p.name);
         return names.join(',');
       }},
  };
  return members;
}

// Every [search] member or searched parameter that differs, as "search.KEY: A != B".
QStringList searchDiffs(const search::SearchSpace& a, const search::SearchSpace& b) {
  QStringList diffs;
  for (const auto& [key, get] : searchMembers()) {
    if (get(a) != get(b)) diffs << QStringLiteral("search.%1: %2 != %3").arg(key, get(a), get(b));
  }
  for (const auto& p : a.params) {
    const int j = b.index_of(p.name);
    const QString other = j < 0 ? QStringLiteral("(absent)") : paramText(b.params[std::size_t(j)]);
    if (paramText(p) != other) {
      diffs << QStringLiteral("search.space.\"%1\": %2 != %3")
                   .arg(QString::fromStdString(p.name), paramText(p), other);
    }
  }
  return diffs;
}

spec::Experiment readFile(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
  auto exp = spec::read_experiment_unvalidated(file.readAll().toStdString(), path.toStdString());
  if (!exp) qFatal("%s", exp.message().c_str());
  return *exp;
}

search::SearchSpace searchOf(const spec::Experiment& exp) {
  auto space = search::parse_search_space(exp.search.toml, exp.source);
  if (!space) qFatal("%s", space.message().c_str());
  return *space;
}

// ---- the user's hands ---------------------------------------------------------------------

void typeInto(QLineEdit* edit, const QString& value) {
  edit->setFocus();
  edit->selectAll();
  QTest::keyClick(edit, Qt::Key_Backspace);
  QTest::keyClicks(edit, value);
  QTest::keyClick(edit, Qt::Key_Return);
}

void typeInto(QSpinBox* spin, const QString& value) {
  spin->setFocus();
  spin->selectAll();
  QTest::keyClicks(spin, value);
  QTest::keyClick(spin, Qt::Key_Return);
}

// Home, then Down until the wanted item: keyboard selection as on a closed combo box.
bool choose(QComboBox* combo, const QString& item) {
  const int target = combo->findText(item);
  if (target < 0) return false;
  combo->setFocus();
  QTest::keyClick(combo, Qt::Key_Home);
  for (int i = 0; i < target; ++i) QTest::keyClick(combo, Qt::Key_Down);
  return combo->currentIndex() == target;
}

void toggleTo(QCheckBox* box, bool on) {
  if (box->isChecked() != on) QTest::keyClick(box, Qt::Key_Space);
}

// Enters `value` into any of the builder's editors; false when the widget kind is unknown.
bool enter(QWidget* w, const QString& value) {
  if (auto* spin = qobject_cast<QSpinBox*>(w)) {
    typeInto(spin, value);
    return spin->value() == value.toInt();
  }
  if (auto* combo = qobject_cast<QComboBox*>(w)) return choose(combo, value);
  if (auto* box = qobject_cast<QCheckBox*>(w)) {
    toggleTo(box, value == "true");
    return box->isChecked() == (value == "true");
  }
  if (auto* edit = qobject_cast<QLineEdit*>(w)) {
    typeInto(edit, value);
    return edit->text() == value;
  }
  return false;
}

// Opens the cell's editor as a double click would, types, and commits with Return.
bool typeIntoCell(QTableWidget* table, int row, int column, const QString& value) {
  QTableWidgetItem* item = table->item(row, column);
  if (item == nullptr) return false;
  table->setCurrentCell(row, column);
  table->editItem(item);
  auto* editor = qobject_cast<QLineEdit*>(table->indexWidget(table->model()->index(row, column)));
  if (editor == nullptr) return false;
  editor->selectAll();
  QTest::keyClick(editor, Qt::Key_Backspace);
  QTest::keyClicks(editor, value);
  QTest::keyClick(editor, Qt::Key_Return);
  // The delegate commits Return through a queued call: wait for it as a user would.
  const QModelIndex index = table->model()->index(row, column);
  return QTest::qWaitFor([&] { return item->text() == value && !table->indexWidget(index); },
                         10000);
}

// What a widget shows, as the text kTyped/kSearchTyped hold.
QString shown(QWidget* w) {
  if (auto* spin = qobject_cast<QSpinBox*>(w)) return QString::number(spin->value());
  if (auto* combo = qobject_cast<QComboBox*>(w)) return combo->currentText();
  if (auto* box = qobject_cast<QCheckBox*>(w)) return box->isChecked() ? "true" : "false";
  if (auto* edit = qobject_cast<QLineEdit*>(w)) return edit->text();
  return QStringLiteral("<unknown widget>");
}

// Equal as text, or as numbers when both read as numbers ("2.5e-05" shows what "2.5e-5" typed).
bool sameShown(const QString& shownText, const QString& expected) {
  if (shownText == expected) return true;
  bool a = false;
  bool b = false;
  const double x = shownText.toDouble(&a);
  const double y = expected.toDouble(&b);
  return a && b && x == y;
}

}  // namespace

class TestBuilderRoundTrip : public QObject {
  Q_OBJECT

  spec::Experiment m_fixture;
  search::SearchSpace m_fixtureSearch;

 private slots:
  void initTestCase() {
    m_fixture = readFile(kFixture);
    m_fixtureSearch = searchOf(m_fixture);
  }

  // The fixture is what the test claims: every field away from its default, a search space
  // with each kind of parameter; and the typing tables cover every field and setting.
  void fixtureSetsEveryFieldAwayFromItsDefault() {
    QStringList all;
    for (const auto& f : spec::field_catalog()) all << QString::fromStdString(f.path);
    const QStringList changed = experimentDiffs(m_fixture, spec::Experiment{});
    QCOMPARE(changed.size(), all.size());
    QStringList typed = kTyped.keys();
    typed.sort();
    all.sort();
    QCOMPARE(typed, all);
    QStringList settings = SearchEditor::settingKeys();
    QStringList searchTyped = kSearchTyped.keys();
    settings.sort();
    searchTyped.sort();
    QCOMPARE(searchTyped, settings);

    search::SearchSpace defaults;
    const QStringList searchChanged = searchDiffs(m_fixtureSearch, defaults);
    QCOMPARE(searchChanged.size(), searchMembers().size() + int(m_fixtureSearch.params.size()));
    bool floatLog = false;
    bool intStep = false;
    bool floatStep = false;
    bool categorical = false;
    bool flag = false;
    bool condition = false;
    for (const auto& p : m_fixtureSearch.params) {
      floatLog |= p.type == search::ParamType::Float && p.log;
      floatStep |= p.type == search::ParamType::Float && p.step > 0;
      intStep |= p.type == search::ParamType::Int && p.step > 1;
      categorical |= p.type == search::ParamType::Categorical;
      flag |= p.type == search::ParamType::Bool;
      condition |= !p.when.empty();
    }
    QVERIFY(floatLog && intStep && floatStep && categorical && flag && condition);
    QCOMPARE(int(m_fixtureSearch.params.size()), int(kRows.size()));
  }

  // The comparison is not blind: changing any one field of the fixture names that field.
  void comparisonNamesTheOneFieldThatDiffers() {
    for (const auto& f : spec::field_catalog()) {
      spec::Experiment changed = m_fixture;
      // The default as --set reads it; an empty string needs its quotes.
      const std::string value = f.default_text.empty() ? "\"\"" : f.default_text;
      const auto set = spec::set_field(changed, f.path, value);
      QVERIFY2(set.ok(), set.ok() ? "" : set.message().c_str());
      const QStringList diffs = experimentDiffs(changed, m_fixture);
      QCOMPARE(diffs.size(), 1);
      QVERIFY2(diffs.first().startsWith(QString::fromStdString(f.path) + ":"),
               qPrintable(diffs.first()));
    }
    search::SearchSpace changed = m_fixtureSearch;
    changed.params.back().high += 0.05;
    QStringList diffs = searchDiffs(changed, m_fixtureSearch);
    QCOMPARE(diffs.size(), 1);
    QVERIFY2(diffs.first().startsWith("search.space.\""), qPrintable(diffs.first()));
    changed = m_fixtureSearch;
    changed.pruner.bootstrap_count += 1;
    diffs = searchDiffs(changed, m_fixtureSearch);
    QCOMPARE(diffs, QStringList{"search.pruner.bootstrap_count: 3 != 2"});
  }

  // a. Every widget filled by hand, saved, parsed: equal to the fixture, field by field.
  void fillingEveryWidgetSavesTheFixture() {
    BuilderPanel panel;
    panel.resize(1600, 1000);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QStringList refused;
    for (const auto& f : spec::field_catalog()) {
      const QString path = QString::fromStdString(f.path);
      auto* w = panel.findChild<QWidget*>(path);  // editors are named by their field path
      QVERIFY2(w != nullptr, qPrintable(path + ": no widget"));
      QCOMPARE(w, panel.editor(path));
      if (!enter(w, kTyped.value(path))) refused << path + " shows " + shown(w);
    }
    QVERIFY2(refused.isEmpty(), qPrintable(refused.join('\n')));
    fillSearch(panel);
    if (QTest::currentTestFailed()) return;

    QTemporaryDir dir;
    const QString saved = dir.filePath("saved.toml");
    QString error;
    QVERIFY2(panel.controller()->saveFile(saved, &error), qPrintable(error));
    const spec::Experiment parsed = readFile(saved);
    const QStringList diffs = experimentDiffs(parsed, m_fixture);
    QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join('\n')));
    QVERIFY(parsed.search.present);
    const QStringList searchDiffList = searchDiffs(searchOf(parsed), m_fixtureSearch);
    QVERIFY2(searchDiffList.isEmpty(), qPrintable(searchDiffList.join('\n')));
    QCOMPARE(searchOf(parsed).params.size(), m_fixtureSearch.params.size());
  }

  // b. Opening the fixture sets every widget to its value.
  void openingTheFixtureSetsEveryWidget() {
    BuilderPanel panel;
    QString error;
    QVERIFY2(panel.controller()->openFile(kFixture, &error), qPrintable(error));
    panel.refreshNow();
    QStringList wrong;
    for (const auto& f : spec::field_catalog()) {
      const QString path = QString::fromStdString(f.path);
      const QString now = shown(panel.editor(path));
      if (!sameShown(now, kTyped.value(path)))
        wrong << path + ": shows \"" + now + "\", fixture has \"" + kTyped.value(path) + "\"";
    }
    SearchEditor* search = panel.searchEditor();
    QVERIFY(search->enabledBox()->isChecked());
    for (auto it = kSearchTyped.cbegin(); it != kSearchTyped.cend(); ++it) {
      const QString now = shown(search->setting(it.key()));
      if (!sameShown(now, it.value()))
        wrong << "search." + it.key() + ": shows \"" + now + "\", fixture has \"" + it.value() +
                     "\"";
    }
    QTableWidget* table = search->table();
    QCOMPARE(table->rowCount(), int(kRows.size()));
    for (const QStringList& row : kRows) {
      const auto found = table->findItems(row[SearchEditor::Name], Qt::MatchExactly);
      QVERIFY2(found.size() == 1, qPrintable(row[SearchEditor::Name]));
      const int r = found.first()->row();
      for (int c = 0; c < SearchEditor::ColumnCount; ++c) {
        const QString now = table->item(r, c)->text();
        if (!sameShown(now, row[c]))
          wrong << QStringLiteral("space row %1 column %2: shows \"%3\", fixture has \"%4\"")
                       .arg(row[0])
                       .arg(c)
                       .arg(now, row[c]);
      }
    }
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join('\n')));
  }

  // c. A population-based training file (examples/demo-pbt.toml) opened and saved keeps its
  // [search.pbt] exactly, and the editor says what it holds.
  void savingKeepsPopulationBasedTraining() {
    const QString example = shardscope::testing::sourceDir() + "/examples/demo-pbt.toml";
    BuilderPanel panel;
    QString error;
    QVERIFY2(panel.controller()->openFile(example, &error), qPrintable(error));
    panel.refreshNow();
    const search::SearchSpace before = searchOf(readFile(example));
    QVERIFY(before.pbt.has_value());
    auto* note = panel.findChild<QLabel*>("search.pbt");
    QVERIFY(note != nullptr);
    QVERIFY2(!note->isHidden() && note->text().contains("4 members") &&
                 note->text().contains("segments of 15 steps"),
             qPrintable(note->text()));
    QTemporaryDir dir;
    const QString saved = dir.filePath("pbt.toml");
    QVERIFY2(panel.controller()->saveFile(saved, &error), qPrintable(error));
    const search::SearchSpace after = searchOf(readFile(saved));
    QVERIFY2(after.pbt.has_value(), "saving dropped [search.pbt]");
    QVERIFY(*after.pbt == *before.pbt);
    QStringList diffs = searchDiffs(after, before);
    QVERIFY2(diffs.isEmpty(), qPrintable(diffs.join('\n')));
    // A file without it shows no note and writes none.
    QVERIFY2(panel.controller()->openFile(kFixture, &error), qPrintable(error));
    panel.refreshNow();
    QVERIFY(note->isHidden());
    QVERIFY(!panel.searchEditor()->toml().contains("[search.pbt]"));
  }

  // d. The [search.pbt] widgets as a user edits them: population, interval, quantile, factors,
  // the mutable checkboxes and the resample probability typed or ticked, the saved file parses
  // to exactly the new values; the switch off saves no [search.pbt], on again the values are back.
  void editingPopulationBasedTrainingSavesIt() {
    const QString example = shardscope::testing::sourceDir() + "/examples/demo-pbt.toml";
    BuilderPanel panel;
    panel.show();
    QString error;
    QVERIFY2(panel.controller()->openFile(example, &error), qPrintable(error));
    panel.refreshNow();
    panel.sections()->setCurrentIndex(panel.sections()->count() - 1);  // the search tab
    auto* box = panel.findChild<QGroupBox*>("search.pbt.enabled");
    QVERIFY(box != nullptr);
    QVERIFY(box->isChecked());
    // One checkbox per name spec allows, ticked as the file has them.
    for (const std::string_view name : spec::kPbtMutable) {
      auto* tick = panel.findChild<QCheckBox*>(
          "search.pbt.mutable." + QString::fromUtf8(name.data(), qsizetype(name.size())));
      QVERIFY2(tick != nullptr, name.data());
      QCOMPARE(tick->isChecked(), name == "train.lr" || name == "train.weight_decay");
    }
    const QList<std::pair<const char*, const char*>> typed = {{"population", "6"},
                                                              {"interval_steps", "30"},
                                                              {"quantile", "0.5"},
                                                              {"factors", "0.5, 2"},
                                                              {"resample_probability", "0"}};
    for (const auto& [key, value] : typed) {
      QWidget* w = panel.findChild<QWidget*>(QStringLiteral("search.pbt.") + key);
      QVERIFY2(w != nullptr, key);
      QVERIFY2(enter(w, value), key);
    }
    toggleTo(panel.findChild<QCheckBox*>("search.pbt.mutable.train.weight_decay"), false);
    spec::PbtConfig want;
    want.population = 6;
    want.interval_steps = 30;
    want.quantile = 0.5;
    want.factors = {0.5, 2.0};
    want.mutable_params = {"train.lr"};
    want.resample_probability = 0.0;
    QTemporaryDir dir;
    const QString saved = dir.filePath("pbt.toml");
    QVERIFY2(panel.controller()->saveFile(saved, &error), qPrintable(error));
    const search::SearchSpace after = searchOf(readFile(saved));
    QVERIFY2(after.pbt.has_value(), "saving dropped [search.pbt]");
    QCOMPARE(after.pbt->population, want.population);
    QCOMPARE(after.pbt->interval_steps, want.interval_steps);
    QCOMPARE(after.pbt->quantile, want.quantile);
    QCOMPARE(after.pbt->factors, want.factors);
    QCOMPARE(after.pbt->mutable_params, want.mutable_params);
    QCOMPARE(after.pbt->resample_probability, want.resample_probability);
    auto* note = panel.findChild<QLabel*>("search.pbt");
    QVERIFY2(note->text() == "6 members, segments of 30 steps, changing train.lr",
             qPrintable(note->text()));
    // The sampler and n_trials do not apply while PBT is on.
    QVERIFY(!panel.searchEditor()->setting("sampler")->isEnabled());
    QVERIFY(!panel.searchEditor()->setting("n_trials")->isEnabled());
    // Off: a plain search is saved; on again: the edited values come back.
    box->setChecked(false);
    QVERIFY(panel.searchEditor()->setting("sampler")->isEnabled());
    QVERIFY2(panel.controller()->saveFile(saved, &error), qPrintable(error));
    QVERIFY(!searchOf(readFile(saved)).pbt.has_value());
    box->setChecked(true);
    QVERIFY2(panel.controller()->saveFile(saved, &error), qPrintable(error));
    const search::SearchSpace again = searchOf(readFile(saved));
    QVERIFY(again.pbt.has_value());
    QVERIFY(*again.pbt == *after.pbt);
    // As a user sees it: the search tab with the group (tests/artifacts/builder-pbt.png).
    panel.resize(1400, 900);
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(panel.grab().save(artifacts + "/builder-pbt.png"));
  }

 private:
  void fillSearch(BuilderPanel& panel) {
    panel.sections()->setCurrentIndex(panel.sections()->count() - 1);  // the search tab
    SearchEditor* search = panel.searchEditor();
    toggleTo(search->enabledBox(), true);
    QStringList refused;
    for (const QString& key : SearchEditor::settingKeys()) {
      QWidget* w = panel.findChild<QWidget*>("search." + key);
      QVERIFY2(w != nullptr, qPrintable(key));
      QCOMPARE(w, search->setting(key));
      if (!enter(w, kSearchTyped.value(key))) refused << key + " shows " + shown(w);
    }
    QVERIFY2(refused.isEmpty(), qPrintable(refused.join('\n')));
    auto* add = panel.findChild<QPushButton*>("search.add");
    QVERIFY(add != nullptr);
    QTableWidget* table = search->table();
    for (int r = 0; r < kRows.size(); ++r) {
      QTest::mouseClick(add, Qt::LeftButton);
      QCOMPARE(table->rowCount(), r + 1);
      for (int c = 0; c < SearchEditor::ColumnCount; ++c) {
        QVERIFY2(typeIntoCell(table, r, c, kRows[r][c]),
                 qPrintable(QStringLiteral("row %1 column %2").arg(r).arg(c)));
      }
    }
  }
};

QTEST_MAIN(TestBuilderRoundTrip)
#include "tst_builderroundtrip.moc"
