// The builder panel's widgets; BuilderController holds the state.
#include "ui/builder/builderpanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <limits>

#include "backend/store/runstore.h"
#include "spec/field_catalog.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/inspectpanel.h"
#include "ui/builder/memorychart.h"
#include "ui/builder/previewpanel.h"
#include "ui/builder/searcheditor.h"
#include "ui/widgets/candidatetable.h"

Q_LOGGING_CATEGORY(lcBuilderPanel, "shardscope.ui.builder.panel")

namespace shardscope::ui {
namespace {

constexpr int kRefreshDelayMs = 40;  // coalesces edits into one redraw of the previews
const char* const kErrorStyle = "color: #b92b27;";

QString unquote(QString s) {
  s = s.trimmed();
  if (s.size() >= 2 && s.startsWith(QLatin1Char('"')) && s.endsWith(QLatin1Char('"'))) {
    s = s.mid(1, s.size() - 2);
    s.replace(QStringLiteral("\\\""), QStringLiteral("\"")).replace(QStringLiteral("\\\\"), "\\");
  }
  return s;
}

QString quote(const QString& s) {
  QString out = s;
  out.replace(QLatin1Char('\\'), QStringLiteral("\\\\")).replace(QLatin1Char('"'), "\\\"");
  return QLatin1Char('"') + out + QLatin1Char('"');
}

// Lists and maps are edited as "a, b" and "K=V, K2=V2"; the spec reads TOML arrays/tables.
QString shownText(const spec::FieldInfo& f, const QString& value) {
  if (f.type != spec::FieldType::list && f.type != spec::FieldType::map) return value;
  QString inner = value.trimmed().mid(1);
  inner.chop(1);
  QStringList parts;
  for (const QString& part : inner.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    if (f.type == spec::FieldType::list) {
      parts << unquote(part);
    } else {
      const auto eq = part.indexOf(QLatin1Char('='));
      parts << unquote(part.left(eq)) + QLatin1Char('=') + unquote(part.mid(eq + 1));
    }
  }
  return parts.join(QStringLiteral(", "));
}

QString fieldText(const spec::FieldInfo& f, const QString& shown) {
  if (f.type != spec::FieldType::list && f.type != spec::FieldType::map) return shown;
  QStringList parts;
  for (const QString& raw : shown.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    const QString part = raw.trimmed();
    if (f.type == spec::FieldType::map) {
      const auto eq = part.indexOf(QLatin1Char('='));
      parts << quote(part.left(eq).trimmed()) + QStringLiteral(" = ") +
                   quote(eq < 0 ? QString() : part.mid(eq + 1).trimmed());
    } else {
      parts << (f.list_of_int ? part : quote(part));
    }
  }
  if (f.type == spec::FieldType::map) return QStringLiteral("{ ") + parts.join(", ") + " }";
  return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

QString tooltip(const spec::FieldInfo& f) {
  return QStringLiteral("<b>%1</b> (%2)<br>%3<br>Default: <code>%4</code>")
      .arg(QString::fromStdString(f.path), QString::fromStdString(std::string(to_string(f.type))),
           QString::fromStdString(f.doc).toHtmlEscaped(),
           QString::fromStdString(f.default_text).toHtmlEscaped());
}

}  // namespace

BuilderPanel::BuilderPanel(QWidget* parent)
    : QWidget(parent), m_controller(new BuilderController(this)), m_refresh(new QTimer(this)) {
  m_tabs = new QTabWidget(this);
  for (const auto& section : spec::catalog_sections()) {
    m_tabs->addTab(buildSection(QString::fromStdString(section)), QString::fromStdString(section));
  }
  m_search = new SearchEditor(this);
  m_searchMessage = new QLabel(this);
  m_searchMessage->setWordWrap(true);
  m_searchMessage->setStyleSheet(QString::fromLatin1(kErrorStyle));
  auto* searchPage = new QWidget(this);
  auto* searchLayout = new QVBoxLayout(searchPage);
  searchLayout->addWidget(m_search, 1);
  searchLayout->addWidget(m_searchMessage);
  auto* searchScroll = new QScrollArea(this);
  searchScroll->setWidgetResizable(true);
  searchScroll->setWidget(searchPage);
  m_tabs->addTab(searchScroll, QStringLiteral("search"));

  m_memory = new MemoryChart(this);
  m_preview = new PreviewPanel(this);
  m_inspect = new InspectPanel(this);
  m_toml = new QPlainTextEdit(this);
  m_toml->setReadOnly(true);
  m_toml->setFont(QFont(QStringLiteral("monospace"), 8));
  m_command = new QLineEdit(this);
  m_command->setReadOnly(true);
  auto* right = new QTabWidget(this);
  m_right = right;
  right->addTab(m_memory, tr("Memory per rank"));
  right->addTab(m_preview, tr("Model && data"));
  // Its histogram, two tables and sample view want about 500 px: scrolled, so that the Builder
  // does not make the window taller than 1000 px (it grew to 1003 once the summary wrapped).
  auto* inspectScroll = new QScrollArea(this);
  inspectScroll->setWidgetResizable(true);
  inspectScroll->setFrameShape(QFrame::NoFrame);
  inspectScroll->setWidget(m_inspect);
  right->addTab(inspectScroll, tr("Inspect data"));
  right->addTab(m_toml, tr("TOML"));
  m_tunePage = buildAutotune();
  right->addTab(m_tunePage, tr("Autotune"));
  auto* splitter = new QSplitter(this);
  splitter->addWidget(m_tabs);
  splitter->addWidget(right);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(buildToolbar());
  layout->addWidget(m_summary);
  layout->addWidget(splitter, 1);
  auto* commandRow = new QHBoxLayout;
  commandRow->addWidget(new QLabel(tr("Command:"), this));
  commandRow->addWidget(m_command, 1);
  m_commandNote = new QLabel(tr("<i>not saved yet: Launch saves it to this file first</i>"), this);
  m_commandNote->setObjectName(QStringLiteral("commandNote"));
  commandRow->addWidget(m_commandNote);
  layout->addLayout(commandRow);

  m_refresh->setSingleShot(true);
  m_refresh->setInterval(kRefreshDelayMs);
  connect(m_refresh, &QTimer::timeout, this, &BuilderPanel::refreshNow);
  connect(m_controller, &BuilderController::fieldChanged, this, [this](const QString& path) {
    if (path.isEmpty()) m_allDirty = true;
    m_dirty << path;
    m_refresh->start();
  });
  connect(m_controller, &BuilderController::filePathChanged, this, [this] { m_refresh->start(); });
  connect(m_controller, &BuilderController::issuesChanged, this, &BuilderPanel::showIssues);
  connect(m_controller, &BuilderController::launchAllowedChanged, m_launch,
          &QPushButton::setEnabled);
  connect(m_controller, &BuilderController::editRejected, this,
          [this](const QString& path, const QString& message) {
            if (auto* label = messageLabel(path)) {
              label->setText(message);
              label->setVisible(true);
            }
          });
  connect(m_search, &SearchEditor::edited, m_controller, &BuilderController::setSearchToml);
  refreshNow();
  showIssues();
}

QWidget* BuilderPanel::buildToolbar() {
  auto* bar = new QWidget(this);
  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(0, 0, 0, 0);
  m_templates = new QComboBox(bar);
  m_templates->addItems(BuilderController::templateNames());
  auto* useTemplate = new QPushButton(tr("New from template"), bar);
  auto* open = new QPushButton(tr("Open…"), bar);
  auto* save = new QPushButton(tr("Save"), bar);
  auto* saveAs = new QPushButton(tr("Save as…"), bar);
  auto* undo = new QPushButton(tr("Undo"), bar);
  auto* redo = new QPushButton(tr("Redo"), bar);
  m_launch = new QPushButton(tr("Launch"), bar);
  m_launch->setEnabled(m_controller->launchAllowed());
  open->setShortcut(QKeySequence::Open);
  save->setShortcut(QKeySequence::Save);
  undo->setShortcut(QKeySequence::Undo);
  redo->setShortcut(QKeySequence::Redo);
  for (QWidget* w :
       {static_cast<QWidget*>(m_templates), static_cast<QWidget*>(useTemplate),
        static_cast<QWidget*>(open), static_cast<QWidget*>(save), static_cast<QWidget*>(saveAs),
        static_cast<QWidget*>(undo), static_cast<QWidget*>(redo)})
    row->addWidget(w);
  m_autotune = new QPushButton(tr("Autotune"), bar);
  m_autotune->setToolTip(
      tr("Measure short runs of the sharding and batching setups that fit and find the fastest "
         "(shardscope-cli autotune); the options are on the Autotune tab"));
  m_replanOnOom = new QCheckBox(tr("Replan on out-of-memory"), bar);
  m_replanOnOom->setChecked(m_controller->replanOnOom());
  m_replanOnOom->setToolTip(
      tr("A run whose attempt runs out of memory runs again from the start in the next plan "
         "that fits, with the same global batch and loss: half the micro-batch, then activation "
         "checkpointing, then offloading the optimizer, then the parameters (shardscope-cli run "
         "--replan-on-oom). A sweep follows search.on_oom instead"));
  row->addStretch();
  row->addWidget(m_autotune);
  row->addWidget(m_replanOnOom);
  row->addWidget(m_launch);
  connect(m_replanOnOom, &QCheckBox::toggled, m_controller, &BuilderController::setReplanOnOom);
  auto* stack = m_controller->undoStack();
  connect(undo, &QPushButton::clicked, stack, &QUndoStack::undo);
  connect(redo, &QPushButton::clicked, stack, &QUndoStack::redo);
  connect(stack, &QUndoStack::canUndoChanged, undo, &QPushButton::setEnabled);
  connect(stack, &QUndoStack::canRedoChanged, redo, &QPushButton::setEnabled);
  undo->setEnabled(false);
  redo->setEnabled(false);
  connect(open, &QPushButton::clicked, this, &BuilderPanel::openDialog);
  connect(save, &QPushButton::clicked, this, [this] { saveDialog(false); });
  connect(saveAs, &QPushButton::clicked, this, [this] { saveDialog(true); });
  connect(m_launch, &QPushButton::clicked, m_controller, &BuilderController::requestLaunch);
  connect(m_autotune, &QPushButton::clicked, this, &BuilderPanel::requestAutotune);
  connect(useTemplate, &QPushButton::clicked, this, [this] {
    QString error;
    if (!m_controller->loadTemplate(m_templates->currentText(), &error)) {
      QMessageBox::warning(this, tr("Template"), error);
    }
  });
  return bar;
}

QWidget* BuilderPanel::buildSection(const QString& section) {
  auto* page = new QWidget;
  auto* form = new QFormLayout(page);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  for (const auto& f : spec::field_catalog()) {
    if (QString::fromStdString(f.section) != section) continue;
    const QString path = QString::fromStdString(f.path);
    Row row;
    row.editor = buildEditor(f);
    row.editor->setObjectName(path);  // tests and screen readers find a field by its path
    row.editor->setToolTip(tooltip(f));
    row.message = new QLabel(page);
    row.message->setWordWrap(true);
    row.message->setStyleSheet(QString::fromLatin1(kErrorStyle));
    row.message->setVisible(false);
    auto* cell = new QWidget(page);
    auto* cellLayout = new QVBoxLayout(cell);
    cellLayout->setContentsMargins(0, 0, 0, 0);
    cellLayout->setSpacing(1);
    const bool browse =
        path == "model.path" || path == "data.train_path" || path == "data.eval_path";
    cellLayout->addWidget(browse ? withBrowse(qobject_cast<QLineEdit*>(row.editor), path)
                                 : row.editor);
    cellLayout->addWidget(row.message);
    auto* label = new QLabel(QString::fromStdString(f.key), page);
    label->setToolTip(tooltip(f));
    form->addRow(label, cell);
    m_rows.insert(path, row);
  }
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  scroll->setWidget(page);
  return scroll;
}

QWidget* BuilderPanel::buildEditor(const spec::FieldInfo& f) {
  const QString path = QString::fromStdString(f.path);
  switch (f.type) {
    case spec::FieldType::boolean: {
      auto* box = new QCheckBox;
      connect(box, &QCheckBox::toggled, this, [this, path](bool on) {
        m_controller->setField(path, on ? QStringLiteral("true") : QStringLiteral("false"));
      });
      return box;
    }
    case spec::FieldType::string:
      if (f.choices.empty()) return lineEditor(f);
      [[fallthrough]];  // a string with a fixed vocabulary (lora.quantize) is picked like an enum
    case spec::FieldType::enumeration: {
      auto* combo = new QComboBox;
      for (const auto& c : f.choices) combo->addItem(QString::fromStdString(c));
      connect(combo, &QComboBox::currentTextChanged, this,
              [this, path](const QString& text) { m_controller->setField(path, text); });
      return combo;
    }
    case spec::FieldType::integer:
      if (!f.is_unsigned) {
        auto* spin = new QSpinBox;
        spin->setRange(std::numeric_limits<int>::min() + 1, std::numeric_limits<int>::max());
        spin->setGroupSeparatorShown(true);
        connect(spin, &QSpinBox::valueChanged, this,
                [this, path](int v) { m_controller->setField(path, QString::number(v)); });
        return spin;
      }
      [[fallthrough]];
    default:
      return lineEditor(f);
  }
}

QLineEdit* BuilderPanel::lineEditor(const spec::FieldInfo& f) {
  const QString path = QString::fromStdString(f.path);
  auto* edit = new QLineEdit;
  if (f.type == spec::FieldType::list) edit->setPlaceholderText(tr("comma-separated"));
  if (f.type == spec::FieldType::map) edit->setPlaceholderText(tr("NAME=value, ..."));
  connect(edit, &QLineEdit::editingFinished, this,
          [this, path, edit] { commitText(path, edit->text()); });
  return edit;
}

QWidget* BuilderPanel::withBrowse(QLineEdit* edit, const QString& path) {
  auto* box = new QWidget;
  auto* row = new QHBoxLayout(box);
  row->setContentsMargins(0, 0, 0, 0);
  auto* browse = new QPushButton(tr("Browse…"), box);
  row->addWidget(edit, 1);
  row->addWidget(browse);
  connect(browse, &QPushButton::clicked, this, [this, edit, path] {
    const QString picked =
        path == QLatin1String("model.path")
            ? QFileDialog::getExistingDirectory(this, tr("Model folder (config.json)"),
                                                edit->text())
            : QFileDialog::getOpenFileName(this, tr("JSONL data"), edit->text(),
                                           tr("JSON Lines (*.jsonl);;All files (*)"));
    if (picked.isEmpty()) return;
    edit->setText(picked);
    commitText(path, picked);
  });
  return box;
}

void BuilderPanel::commitText(const QString& path, const QString& shown) {
  const auto* f = spec::find_field(path.toStdString());
  if (!f) return;
  if (shownText(*f, m_controller->fieldText(path)) == shown) return;
  m_controller->setField(path, fieldText(*f, shown));
}

QWidget* BuilderPanel::editor(const QString& path) const { return m_rows.value(path).editor; }

QLabel* BuilderPanel::messageLabel(const QString& path) const { return m_rows.value(path).message; }

void BuilderPanel::syncEditor(const QString& path) {
  const auto* f = spec::find_field(path.toStdString());
  QWidget* w = editor(path);
  if (!f || !w) return;
  const QString value = m_controller->fieldText(path);
  const QSignalBlocker block(w);
  if (auto* box = qobject_cast<QCheckBox*>(w)) {
    box->setChecked(value == QLatin1String("true"));
  } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
    // A string field's file may hold a value outside its choices ("nf8"): it is shown as an
    // extra item, with validation's message beside it, rather than hidden behind another one.
    if (combo->findText(value) < 0) combo->addItem(value);
    combo->setCurrentText(value);
  } else if (auto* spin = qobject_cast<QSpinBox*>(w)) {
    spin->setValue(value.toInt());
  } else if (auto* edit = qobject_cast<QLineEdit*>(w)) {
    if (!edit->hasFocus() || edit->text() != shownText(*f, value))
      edit->setText(shownText(*f, value));
  }
}

bool BuilderPanel::isRefreshPending() const { return m_refresh->isActive(); }

void BuilderPanel::refreshNow() {
  m_refresh->stop();
  if (m_allDirty) {
    for (auto it = m_rows.cbegin(); it != m_rows.cend(); ++it) syncEditor(it.key());
    m_search->setToml(m_controller->searchToml());
  } else {
    for (const QString& path : std::as_const(m_dirty)) {
      if (path == QLatin1String("search") && m_search->toml() != m_controller->searchToml()) {
        m_search->setToml(m_controller->searchToml());
      }
      syncEditor(path);
    }
  }
  m_allDirty = false;
  m_dirty.clear();
  const auto& exp = m_controller->experiment();
  m_memory->setExperiment(exp);
  m_preview->setExperiment(exp);
  m_inspect->setExperiment(exp);
  m_toml->setPlainText(m_controller->tomlText());
  m_command->setText(m_controller->commandLine());
  m_command->setCursorPosition(0);
  m_commandNote->setVisible(m_controller->filePath().isEmpty());
}

void BuilderPanel::showIssues() {
  const auto issues = m_controller->issues();
  for (auto it = m_rows.begin(); it != m_rows.end(); ++it) {
    const QStringList messages = issues.value(it.key());
    it->message->setText(messages.join(QLatin1Char('\n')));
    it->message->setVisible(!messages.isEmpty());
  }
  m_searchMessage->setText(issues.value(QStringLiteral("search")).join(QLatin1Char('\n')));
  for (int t = 0; t < m_tabs->count(); ++t) {
    const QString section =
        t < m_tabs->count() - 1
            ? QString::fromStdString(spec::catalog_sections()[static_cast<std::size_t>(t)])
            : QStringLiteral("search");
    int n = 0;
    for (auto it = issues.cbegin(); it != issues.cend(); ++it) {
      if (it.key() == section || it.key().startsWith(section + QLatin1Char('.')))
        n += static_cast<int>(it->size());
    }
    m_tabs->setTabText(t, n ? QStringLiteral("%1 (%2)").arg(section).arg(n) : section);
  }
  const int count = m_controller->issueCount();
  QString text = count ? tr("%n problem(s): launch is disabled until they are fixed.", "", count)
                       : tr("No problems: ready to launch.");
  for (const QString& general : issues.value(QString())) text += QLatin1Char('\n') + general;
  m_summary->setText(text);
  m_summary->setStyleSheet(count ? QString::fromLatin1(kErrorStyle) : QString());
  m_launch->setEnabled(m_controller->launchAllowed());
}

QWidget* BuilderPanel::buildAutotune() {
  auto* page = new QWidget(this);
  m_tuneObjective = new QComboBox(page);
  m_tuneObjective->addItem(tr("tokens/s per rank"), QStringLiteral("tokens_per_s"));
  m_tuneObjective->addItem(tr("MFU"), QStringLiteral("mfu"));
  m_tuneMinutes = new QDoubleSpinBox(page);
  m_tuneMinutes->setRange(0, 24 * 60);
  m_tuneMinutes->setValue(30);
  m_tuneMinutes->setSuffix(tr(" min"));
  m_tuneMinutes->setToolTip(tr("No candidate starts after this; 0: no limit"));
  m_tuneSteps = new QSpinBox(page);
  m_tuneSteps->setRange(1, 100000);
  m_tuneSteps->setValue(10);
  m_tuneWarmup = new QSpinBox(page);
  m_tuneWarmup->setRange(0, 100000);
  m_tuneWarmup->setValue(3);
  // One row: the dock is often short, and the candidates need the height.
  auto* form = new QHBoxLayout;
  const auto option = [&](const QString& label, QWidget* editor) {
    form->addWidget(new QLabel(label, page));
    form->addWidget(editor);
  };
  option(tr("Maximise"), m_tuneObjective);
  option(tr("Budget"), m_tuneMinutes);
  option(tr("Steps"), m_tuneSteps);
  option(tr("Warm-up"), m_tuneWarmup);
  form->addStretch();
  m_tuneSteps->setToolTip(tr("Measured optimizer steps per candidate"));
  m_tuneWarmup->setToolTip(tr("Steps each candidate runs first, not measured"));
  m_tuneStatus =
      new QLabel(tr("Autotune measures the setups that fit and keeps the fastest."), page);
  m_tuneStatus->setObjectName(QStringLiteral("autotuneStatus"));
  m_tuneStatus->setWordWrap(true);
  m_tuneStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_tuneTable = new CandidateTable(page);
  m_stopTune = new QPushButton(tr("Stop"), page);
  m_stopTune->setEnabled(false);
  m_stopTune->setToolTip(
      tr("Stop the running candidate and end the search; the best so far "
         "is still written"));
  m_openWinner = new QPushButton(tr("Open winner"), page);
  m_openWinner->setEnabled(false);
  m_openWinner->setToolTip(tr("Load the winner's experiment file into the builder"));
  m_winnerPath = new QLineEdit(page);
  m_winnerPath->setReadOnly(true);
  m_winnerPath->setPlaceholderText(tr("the winner's experiment file, once written"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_stopTune);
  buttons->addWidget(m_winnerPath, 1);
  buttons->addWidget(m_openWinner);
  auto* layout = new QVBoxLayout(page);
  layout->addLayout(form);
  layout->addWidget(m_tuneStatus);
  layout->addWidget(m_tuneTable, 1);
  layout->addLayout(buttons);
  m_tuneWatch = new QTimer(this);
  m_tuneWatch->setInterval(kTuneWatchMs);
  connect(m_tuneWatch, &QTimer::timeout, this, &BuilderPanel::checkTuneProcess);
  connect(m_stopTune, &QPushButton::clicked, this, [this] {
    if (m_tune.studyId < 0) return;
    m_tuneStopping = true;
    m_stopTune->setEnabled(false);
    setTuneMessage(
        tr("Stopping autotune %1: the running candidate ends gracefully…").arg(m_tune.name), false);
    emit autotuneStopRequested(m_tune.studyId, m_tune.name);
  });
  connect(m_openWinner, &QPushButton::clicked, this, [this] {
    if (m_controller->isModified() &&
        QMessageBox::question(this, tr("Open winner"),
                              tr("The builder has unsaved edits; replace them with the winner?")) !=
            QMessageBox::Yes)
      return;
    QString error;
    if (!m_controller->openFile(m_tune.winnerFile, &error))
      QMessageBox::warning(this, tr("Open winner"), error);
  });
  return page;
}

void BuilderPanel::setTuneMessage(const QString& text, bool error) {
  m_tuneStatus->setText(text);
  m_tuneStatus->setStyleSheet(error ? QString::fromLatin1(kErrorStyle) : QString());
}

void BuilderPanel::showSideTab(const QWidget* content) {
  for (int i = 0; i < m_right->count(); ++i) {
    QWidget* page = m_right->widget(i);
    if (page == content || page->isAncestorOf(content)) {
      m_right->setCurrentIndex(i);
      return;
    }
  }
}

void BuilderPanel::requestAutotune() {
  showSideTab(m_tunePage);
  if (m_tuning) return;
  QString why;
  const QString path = m_controller->prepareAutotune(&why);
  if (path.isEmpty()) {
    setTuneMessage(why, true);
    return;
  }
  // Named here, so the run log's record can be watched before the process has written it.
  const QString name = QString::fromStdString(m_controller->experiment().experiment.name) +
                       QStringLiteral("-autotune-") +
                       QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
  m_tune = {};
  m_tune.name = name;
  m_tuning = true;
  m_tuneStopping = false;
  m_tunePid = 0;
  m_tuneLog.clear();
  m_tuneGoneChecks = 0;
  m_tuneTable->setAutotune(m_tune);
  m_winnerPath->clear();
  m_autotune->setEnabled(false);
  m_openWinner->setEnabled(false);
  m_stopTune->setEnabled(false);
  setTuneMessage(tr("Starting autotune %1 of %2…").arg(name, path), false);
  emit autotuneRequested(path, name, m_tuneObjective->currentData().toString(),
                         m_tuneMinutes->value(), m_tuneSteps->value(), m_tuneWarmup->value());
}

void BuilderPanel::autotuneStarted(const QString& study, qint64 pid, const QString& log) {
  if (study != m_tune.name || !m_tuning) return;
  m_tunePid = pid;
  m_tuneLog = log;
  if (m_tune.studyId < 0) {
    setTuneMessage(
        tr("Autotune %1 started (pid %2); waiting for its first candidate…").arg(study).arg(pid),
        false);
  }
  m_tuneWatch->start();
}

void BuilderPanel::autotuneFailed(const QString& study, const QString& message) {
  if (study != m_tune.name || !m_tuning) return;
  setTuneMessage(message, true);
  endTuning();
}

void BuilderPanel::endTuning() {
  m_tuning = false;
  m_tuneWatch->stop();
  m_autotune->setEnabled(true);
  m_stopTune->setEnabled(false);
}

// A process that died (killed, crashed) never ends its record: seen gone twice in a row with the
// record still open, the autotune is over as far as this panel can tell.
void BuilderPanel::checkTuneProcess() {
  if (!m_tuning || m_tunePid <= 0) return;
  if (backend::RunStore::processAlive(m_tunePid)) {
    m_tuneGoneChecks = 0;
    return;
  }
  if (++m_tuneGoneChecks < 2) return;
  setTuneMessage(tr("The autotune process (pid %1) ended without finishing its record; its "
                    "output is in %2")
                     .arg(m_tunePid)
                     .arg(m_tuneLog),
                 true);
  endTuning();
}

void BuilderPanel::showCalibrations(const MemoryCalibrations& calibrations) {
  m_memory->setCalibrations(calibrations.table);
}

void BuilderPanel::showAutotune(const AutotuneData& autotune) {
  if (autotune.name != m_tune.name || m_tune.name.isEmpty()) return;
  if (autotune.studyId < 0) return;  // not recorded yet
  m_tune = autotune;
  m_tuneTable->setAutotune(autotune);
  if (!autotune.candidates.isEmpty()) m_tuneTable->scrollToBottom();
  int measured = 0;
  for (const AutotuneCandidate& c : autotune.candidates) {
    if (c.status == QLatin1String("measured")) ++measured;
  }
  const AutotuneCandidate* winner = nullptr;
  for (const AutotuneCandidate& c : autotune.candidates) {
    if (c.number == autotune.winner) winner = &c;
  }
  if (autotune.running) {
    if (m_tuning && !m_tuneStopping) {
      m_stopTune->setEnabled(true);
      setTuneMessage(tr("Autotune %1 running: %n candidate(s) settled, %2 measured", nullptr,
                        int(autotune.candidates.size()))
                         .arg(autotune.name)
                         .arg(measured),
                     false);
    }
    return;
  }
  endTuning();
  if (const int row = m_tuneTable->rowOf(autotune.winner); row >= 0)
    m_tuneTable->scrollToItem(m_tuneTable->item(row, 0));
  QString text;
  if (winner != nullptr) {
    const double value = autotune.valueOf(*winner);
    text =
        tr("Autotune %1 %2: the winner is #%3, %4 %5, written to %6")
            .arg(autotune.name, autotune.stopped ? tr("stopped (best so far)") : tr("complete"))
            .arg(winner->number)
            .arg(autotune.objective == QLatin1String("mfu") ? QString::number(value, 'f', 4)
                                                            : QString::number(value, 'f', 0),
                 autotune.objective == QLatin1String("mfu") ? tr("MFU") : tr("tokens/s per rank"),
                 autotune.winnerFile.isEmpty() ? tr("(not written)") : autotune.winnerFile);
  } else {
    text = tr("Autotune %1 ended without a measured candidate%2")
               .arg(autotune.name,
                    autotune.error.isEmpty() ? QString() : QStringLiteral(": ") + autotune.error);
  }
  setTuneMessage(text, winner == nullptr);
  m_winnerPath->setText(autotune.winnerFile);
  m_openWinner->setEnabled(winner != nullptr && !autotune.winnerFile.isEmpty());
}

void BuilderPanel::openDialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open experiment"), QString(),
                                                    tr("Experiments (*.toml)"));
  if (path.isEmpty()) return;
  QString error;
  if (!m_controller->openFile(path, &error)) QMessageBox::warning(this, tr("Open"), error);
}

void BuilderPanel::saveDialog(bool askPath) {
  QString path = m_controller->filePath();
  if (askPath || path.isEmpty()) {
    path =
        QFileDialog::getSaveFileName(this, tr("Save experiment"), path, tr("Experiments (*.toml)"));
  }
  if (path.isEmpty()) return;
  QString error;
  if (!m_controller->saveFile(path, &error)) QMessageBox::warning(this, tr("Save"), error);
}

}  // namespace shardscope::ui
