// The builder's state, undo commands and validation.
#include "ui/builder/buildercontroller.h"

#include <QApplication>
#include <QCursor>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QLoggingCategory>
#include <QProgressDialog>
#include <QRegularExpression>
#include <QSaveFile>
#include <QStandardPaths>
#include <QUndoCommand>

#include <memory>

#include "backend/lifecycle/demodata.h"
#include "search/space.h"
#include "spec/field_catalog.h"

Q_LOGGING_CATEGORY(lcBuilderController, "shardscope.ui.builder.controller")

namespace shardscope::ui {
namespace {

// backend::ensureDemoData with the window told why it waits: the shapes demo's first open runs
// `shardtrain make-demo-data` (seconds to a minute of drawing PNGs) before the file shows; a busy
// dialog says so and the window keeps painting (a new user saw a frozen window with the file
// dialog's ghost in it).
Result<bool> ensureDemoDataBusy(const spec::Experiment& exp) {
  if (qobject_cast<QApplication*>(QCoreApplication::instance()) == nullptr ||
      !backend::isShapesDemo(exp))
    return backend::ensureDemoData(exp);
  // Made on the first tick, so only while make-demo-data really runs (not when the data is there).
  std::unique_ptr<QProgressDialog> busy;
  auto written = backend::ensureDemoData(exp, [&busy, &exp] {
    if (!busy) {
      busy = std::make_unique<QProgressDialog>(
          QCoreApplication::translate(
              "BuilderController",
              "Making the shapes demo's data on first use (shardtrain make-demo-data: 3,400 "
              "images, a tiny Qwen2-VL and six probes, in %1). This takes from seconds to a "
              "minute.")
              .arg(QFileInfo(QString::fromStdString(exp.data.train_path)).absolutePath()),
          QString(), 0, 0);
      busy->setWindowTitle(QCoreApplication::translate("BuilderController", "Shapes demo"));
      busy->setWindowModality(Qt::ApplicationModal);
      busy->setMinimumDuration(0);
      busy->setObjectName(QStringLiteral("demoDataProgress"));
      busy->show();
      QGuiApplication::setOverrideCursor(QCursor(Qt::WaitCursor));
    }
    QCoreApplication::processEvents(QEventLoop::ExcludeUserInputEvents);
  });
  if (busy) QGuiApplication::restoreOverrideCursor();
  return written;
}

constexpr int kValidateDelayMs = 150;  // coalesces a burst of edits into one validation

// One field edit: redo sets the new text, undo the old one.
class FieldEditCommand : public QUndoCommand {
 public:
  FieldEditCommand(BuilderController* c, QString path, QString before, QString after)
      : m_c(c), m_path(std::move(path)), m_before(std::move(before)), m_after(std::move(after)) {
    setText(QStringLiteral("Set %1 = %2").arg(m_path, m_after));
  }
  void redo() override { m_c->applyField(m_path, m_after); }
  void undo() override { m_c->applyField(m_path, m_before); }

 private:
  BuilderController* m_c;
  QString m_path;
  QString m_before;
  QString m_after;
};

class SearchEditCommand : public QUndoCommand {
 public:
  SearchEditCommand(BuilderController* c, QString before, QString after)
      : m_c(c), m_before(std::move(before)), m_after(std::move(after)) {
    setText(QStringLiteral("Edit [search]"));
  }
  void redo() override { m_c->applySearch(m_after); }
  void undo() override { m_c->applySearch(m_before); }

 private:
  BuilderController* m_c;
  QString m_before;
  QString m_after;
};

}  // namespace

BuilderController::BuilderController(QObject* parent) : QObject(parent) {
  m_validateTimer.setSingleShot(true);
  m_validateTimer.setInterval(kValidateDelayMs);
  connect(&m_validateTimer, &QTimer::timeout, this, &BuilderController::validateNow);
  validateNow();
}

QString BuilderController::fieldText(const QString& path) const {
  auto text = spec::get_field(m_exp, path.toStdString());
  return text ? QString::fromStdString(*text) : QString();
}

bool BuilderController::setField(const QString& path, const QString& text) {
  const QString before = fieldText(path);
  if (before == text) return true;
  spec::Experiment probe = m_exp;
  if (auto r = spec::set_field(probe, path.toStdString(), text.toStdString()); !r) {
    qCDebug(lcBuilderController) << "refused" << path << text;
    emit editRejected(path, QString::fromStdString(r.message()));
    return false;
  }
  m_undo.push(new FieldEditCommand(this, path, before, text));
  return true;
}

void BuilderController::applyField(const QString& path, const QString& text) {
  if (auto r = spec::set_field(m_exp, path.toStdString(), text.toStdString()); !r) {
    qCWarning(lcBuilderController) << "cannot apply" << path << text << r.message().c_str();
    return;
  }
  emit fieldChanged(path);
  scheduleValidation();
}

QString BuilderController::searchToml() const { return QString::fromStdString(m_exp.search.toml); }

void BuilderController::setSearchToml(const QString& toml) {
  if (toml == searchToml()) return;
  m_undo.push(new SearchEditCommand(this, searchToml(), toml));
}

void BuilderController::applySearch(const QString& toml) {
  m_exp.search.toml = toml.toStdString();
  m_exp.search.present = !toml.trimmed().isEmpty();
  emit fieldChanged(QStringLiteral("search"));
  scheduleValidation();
}

bool BuilderController::openFile(const QString& path, QString* error) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    *error = path + QStringLiteral(": cannot open (") + file.errorString() +
             QStringLiteral("); check the path");
    return false;
  }
  auto exp = spec::read_experiment_unvalidated(file.readAll().toStdString(), path.toStdString());
  if (!exp) {
    *error = QString::fromStdString(exp.message());
    return false;
  }
  // The bundled demo makes its data on first use, as `shardscope-cli run` does, so it validates
  // and launches from a fresh checkout.
  if (auto written = ensureDemoDataBusy(*exp); !written) {
    *error = path + QStringLiteral(": ") + QString::fromStdString(written.message());
    return false;
  } else if (*written) {
    qCInfo(lcBuilderController) << "generated the demo data in" << exp->data.train_path.c_str();
  }
  replaceExperiment(std::move(*exp), path);
  return true;
}

bool BuilderController::saveFile(const QString& path, QString* error) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    *error = path + QStringLiteral(": cannot write (") + file.errorString() +
             QStringLiteral("); choose another folder");
    return false;
  }
  file.write(tomlText().toUtf8());
  if (!file.commit()) {
    *error = path + QStringLiteral(": write failed (") + file.errorString() + QStringLiteral(")");
    return false;
  }
  m_exp.source = path.toStdString();
  m_path = path;
  m_undo.setClean();
  emit filePathChanged(path);
  scheduleValidation();
  return true;
}

bool BuilderController::loadText(const QString& text, const QString& sourceName, QString* error) {
  auto exp = spec::read_experiment_unvalidated(text.toStdString(), sourceName.toStdString());
  if (!exp) {
    *error = QString::fromStdString(exp.message());
    return false;
  }
  // The demo's data is made on first use, as openFile does.
  if (auto written = ensureDemoDataBusy(*exp); !written) {
    *error = sourceName + QStringLiteral(": ") + QString::fromStdString(written.message());
    return false;
  }
  exp->source.clear();
  replaceExperiment(std::move(*exp), QString());
  return true;
}

QStringList BuilderController::templateNames() {
  return {QStringLiteral("demo"), QStringLiteral("qwen2-vl-2b-lora"),
          QStringLiteral("full-finetune")};
}

bool BuilderController::loadTemplate(const QString& name, QString* error) {
  QFile file(QStringLiteral(":/builder/templates/%1.toml").arg(name));
  if (!file.open(QIODevice::ReadOnly)) {
    *error = QStringLiteral("template %1 not found; choose one of %2")
                 .arg(name, templateNames().join(QStringLiteral(", ")));
    return false;
  }
  // A template's relative paths (the demo's data.train_path) resolve in the user's data folder,
  // $XDG_DATA_HOME/shardscope/templates, where the demo makes its data: so a template validates
  // and launches as it is, from any working directory.
  const QString base = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) +
                       QStringLiteral("/shardscope/templates/%1.toml").arg(name);
  return loadText(QString::fromUtf8(file.readAll()), base, error);
}

bool BuilderController::openRecorded(qint64 experimentId, const QString& source,
                                     const QString& toml, const QString& label, QString* error) {
  // Relative paths in the recorded text (data.train_path = "demo-data/train.jsonl") are the
  // source file's: read it as that file, else they resolve against the working directory and the
  // recorded copy never equals the file it came from.
  auto recorded = spec::read_experiment_unvalidated(
      toml.toStdString(), (source.isEmpty() ? label : source).toStdString());
  if (!recorded) {
    *error = QString::fromStdString(recorded.message());
    return false;
  }
  // The file is taken when it still says what ran: the same experiment once both are written
  // by spec's writer (a sweep records the file's text, a run the resolved one).
  QFile file(source);
  if (!source.isEmpty() && file.open(QIODevice::ReadOnly)) {
    auto onDisk =
        spec::read_experiment_unvalidated(file.readAll().toStdString(), source.toStdString());
    if (onDisk && spec::write_experiment_toml(*onDisk) == spec::write_experiment_toml(*recorded)) {
      if (!openFile(source, error)) return false;
      m_recordedId = experimentId;
      return true;
    }
    qCInfo(lcBuilderController) << source << "changed since it ran; showing the recorded copy";
  }
  // The demo's data is made on first use, as openFile does.
  if (auto written = ensureDemoDataBusy(*recorded); !written) {
    *error = label + QStringLiteral(": ") + QString::fromStdString(written.message());
    return false;
  }
  recorded->source.clear();  // unsaved: Save as names its file
  replaceExperiment(std::move(*recorded), QString(), experimentId);
  return true;
}

void BuilderController::replaceExperiment(spec::Experiment exp, const QString& path,
                                          qint64 recordedId) {
  m_exp = std::move(exp);
  m_path = path;
  m_recordedId = recordedId;
  m_undo.clear();
  emit filePathChanged(path);
  emit fieldChanged(QString());
  validateNow();
}

QString BuilderController::tomlText() const {
  return QString::fromStdString(spec::write_experiment_toml(m_exp));
}

QString BuilderController::launchPath() const {
  if (!m_path.isEmpty()) return {};
  QString name = QString::fromStdString(m_exp.experiment.name);
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]")), QStringLiteral("_"));
  if (name.isEmpty()) name = QStringLiteral("experiment");
  if (m_launchPath.isEmpty() || name != m_launchName) {
    const QString folder = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) +
                           QStringLiteral("/shardscope/experiments");
    m_launchName = name;
    m_launchPath = folder + QLatin1Char('/') + name + QLatin1Char('-') +
                   QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")) +
                   QStringLiteral(".toml");
  }
  return m_launchPath;
}

QString BuilderController::commandLine() const {
  // Before a save, the file Launch will write (a "<unsaved>.toml" told a user nothing).
  const QString file = m_path.isEmpty() ? launchPath() : m_path;
  // What Launch starts: a sweep when the experiment has a [search] table, else one run.
  return (m_exp.search.present ? QStringLiteral("shardscope-cli sweep ")
                               : QStringLiteral("shardscope-cli run ")) +
         file;
}

int BuilderController::issueCount() const {
  int n = 0;
  for (const auto& list : m_issues) n += static_cast<int>(list.size());
  return n;
}

void BuilderController::scheduleValidation() { m_validateTimer.start(); }

void BuilderController::validateNow() {
  m_validateTimer.stop();
  QMap<QString, QStringList> issues;
  for (const auto& issue : spec::check_experiment(m_exp, true)) {
    issues[QString::fromStdString(issue.field)].append(QString::fromStdString(issue.message));
  }
  if (m_exp.search.present) {
    auto space = search::parse_search_space(m_exp.search.toml, m_exp.source);
    if (!space) issues[QStringLiteral("search")].append(QString::fromStdString(space.message()));
  }
  m_issues = issues;
  emit issuesChanged();
  const bool allowed = m_issues.isEmpty();
  if (allowed != m_launchAllowed) {
    m_launchAllowed = allowed;
    emit launchAllowedChanged(allowed);
  }
}

void BuilderController::requestLaunch() {
  validateNow();
  if (!m_launchAllowed) return;
  if (!m_path.isEmpty() && !m_undo.isClean()) {
    QString error;
    if (!saveFile(m_path, &error)) {
      qCWarning(lcBuilderController) << error;
      return;
    }
  }
  if (m_path.isEmpty()) {
    // Unsaved (a template, a recorded copy): saved where the command line said (launchPath).
    const QString path = launchPath();
    const QString folder = QFileInfo(path).absolutePath();
    QString error;
    if (!QDir().mkpath(folder) || !saveFile(path, &error)) {
      qCWarning(lcBuilderController) << "cannot save the experiment to launch it:" << path << error;
      emit launchFailed(tr("Cannot save the experiment to launch it: %1 %2").arg(path, error));
      return;
    }
  }
  emit launchRequested(m_path);
}

void BuilderController::setReplanOnOom(bool on) {
  if (on == m_replanOnOom) return;
  m_replanOnOom = on;
  emit replanOnOomChanged(on);
}

}  // namespace shardscope::ui

namespace shardscope::ui {

QString BuilderController::prepareAutotune(QString* why) {
  validateNow();
  if (!m_launchAllowed) {
    QStringList lines;
    for (auto it = m_issues.cbegin(); it != m_issues.cend(); ++it) {
      for (const QString& message : it.value()) {
        // The spec's messages usually start with their field already.
        lines << (it.key().isEmpty() || message.startsWith(it.key()) ? message
                                                                     : it.key() + ": " + message);
      }
    }
    *why = tr("Autotune needs a valid experiment; fix %n field(s) first:\n", nullptr,
              int(m_issues.size())) +
           lines.join(QLatin1Char('\n'));
    return {};
  }
  if (m_path.isEmpty()) {
    *why = tr("Save the experiment first: the autotune reads its file (Save as…)");
    return {};
  }
  if (!m_undo.isClean() && !saveFile(m_path, why)) return {};
  return m_path;
}

}  // namespace shardscope::ui
