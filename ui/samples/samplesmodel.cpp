#include "ui/samples/samplesmodel.h"

#include <QBrush>
#include <QColor>
#include <QSet>

#include <iterator>

#include "ui/samples/worddiff.h"

namespace shardscope::ui {
namespace {

QString scoreText(const SampleCell& s) {
  QStringList parts;
  if (s.exactMatch) parts << QStringLiteral("EM %1").arg(*s.exactMatch ? 1 : 0);
  if (s.f1) parts << QStringLiteral("F1 %1").arg(*s.f1, 0, 'f', 2);
  if (s.cer) parts << QStringLiteral("CER %1").arg(*s.cer, 0, 'f', 2);
  parts << QObject::tr("%n tok", nullptr, int(s.tokens));
  return parts.join(QStringLiteral(" · "));
}

}  // namespace

SamplesModel::SamplesModel(QObject* parent) : QAbstractTableModel(parent) {}

QTextCharFormat SamplesModel::changedFormat() {
  QTextCharFormat f;
  f.setBackground(QColor(0xff, 0xe0, 0x82));  // amber: changed since the column to the left
  return f;
}

QTextCharFormat SamplesModel::wrongFormat() {
  QTextCharFormat f;
  f.setForeground(QColor(0xc6, 0x28, 0x28));  // red, underlined: not in the reference
  f.setFontUnderline(true);
  f.setUnderlineColor(QColor(0xc6, 0x28, 0x28));
  return f;
}

void SamplesModel::setRuns(const QList<qint64>& runIds, bool trials) {
  beginResetModel();
  m_runs = runIds;
  m_trials = trials;
  m_delivered = false;
  m_names.clear();
  m_best.clear();
  m_answers.clear();
  m_probes.clear();
  m_probeRow.clear();
  m_columns.clear();
  m_rows = 0;
  m_grid.clear();
  m_rowChanged.clear();
  m_rowWrong.clear();
  m_verdicts.clear();
  endResetModel();
}

void SamplesModel::apply(const SamplesDelta& delta) {
  if (delta.runIds != m_runs) return;  // an answer to an earlier watch
  for (auto it = delta.thumbnails.begin(); it != delta.thumbnails.end(); ++it)
    m_thumbnails.insert(it.key(), it.value());
  // A run's answers read again (a retry) free what the cells point to: the grid is rebuilt whole.
  bool reset = delta.reset || !m_delivered;
  for (const RunSamples& run : delta.runs) reset = reset || run.reset;
  m_delivered = true;
  if (delta.reset) {  // everything comes again (a new watch, another run log)
    m_answers.clear();
    m_best.clear();
    m_probes.clear();
    m_probeRow.clear();
    m_verdicts.clear();
  }
  for (const RunSamples& run : delta.runs) {
    m_names[run.runId] = run.name;
    if (run.verdictsChanged) m_verdicts.insert(run.runId, run.verdicts);
    m_best[run.runId] = run.bestStep;
    auto& steps = m_answers[run.runId];
    if (run.reset) steps.clear();
    for (const SampleCell& s : run.samples) {
      steps[s.step][s.probe] = s;
      if (!m_probeRow.contains(s.probe)) {
        m_probeRow.insert(s.probe, int(m_probes.size()));
        m_probes.append({s.probe, s.prompt, s.reference.value_or(QString()), s.images});
      }
    }
  }
  const QVector<Column> columns = computeColumns();
  bool prefix = !reset && columns.size() >= m_columns.size();
  for (qsizetype i = 0; prefix && i < m_columns.size(); ++i)
    prefix = sameColumn(m_columns[i], columns[i]);
  if (!prefix) {
    beginResetModel();
    m_columns = columns;
    m_rows = int(m_probes.size());
    buildGrid();
    endResetModel();
    return;
  }
  if (m_probes.size() > m_rows) {
    beginInsertRows({}, m_rows, int(m_probes.size()) - 1);
    m_rows = int(m_probes.size());
    buildGrid();
    endInsertRows();
  }
  if (columns.size() > m_columns.size()) {
    beginInsertColumns({}, int(m_columns.size()) + 1, int(columns.size()));
    m_columns = columns;
    buildGrid();
    endInsertColumns();
  }
  m_columns = columns;  // the same columns, perhaps at another step (a trial's newer answers)
  buildGrid();
  if (m_rows > 0) emit dataChanged(index(0, 0), index(m_rows - 1, int(m_columns.size())));
  emit headerDataChanged(Qt::Horizontal, 0, int(m_columns.size()));
}

QVector<SamplesModel::Column> SamplesModel::computeColumns() const {
  QVector<Column> out;
  if (!m_trials) {
    if (m_runs.isEmpty()) return out;
    const auto it = m_answers.find(m_runs.first());
    if (it == m_answers.end()) return out;
    for (const auto& [step, answers] : it->second) out.append({m_runs.first(), step, false});
    return out;
  }
  for (qint64 run : m_runs) {
    Column c{run, -1, false};
    const auto it = m_answers.find(run);
    if (it != m_answers.end() && !it->second.empty()) {
      c.step = it->second.rbegin()->first;
      // The best evaluation's answers: those of the best step, or the last before it.
      if (const auto best = m_best.value(run)) {
        const auto at = it->second.upper_bound(*best);
        if (at != it->second.begin()) {
          c.step = std::prev(at)->first;
          c.best = true;
        }
      }
    }
    out.append(c);
  }
  return out;
}

bool SamplesModel::sameColumn(const Column& a, const Column& b) const {
  return m_trials ? a.run == b.run : a == b;
}

void SamplesModel::buildGrid() {
  const qsizetype cols = m_columns.size();
  m_grid = QVector<Cell>(m_rows * cols);
  m_rowChanged = QVector<bool>(m_rows, false);
  m_rowWrong = QVector<bool>(m_rows, false);
  for (int c = 0; c < cols; ++c) {
    const Column& column = m_columns[c];
    const auto run = m_answers.find(column.run);
    if (run == m_answers.end()) continue;
    const auto step = run->second.find(column.step);
    if (step == run->second.end()) continue;
    for (const auto& [probe, sample] : step->second) {
      const int row = m_probeRow.value(probe, -1);
      if (row < 0 || row >= m_rows) continue;
      Cell& cell = m_grid[row * cols + c];
      cell.sample = &sample;
      cell.wrong = sample.exactMatch.has_value() && !*sample.exactMatch;
      m_rowWrong[row] = m_rowWrong[row] || cell.wrong;
    }
  }
  for (int row = 0; row < m_rows; ++row) {
    for (int c = 1; c < cols; ++c) {
      Cell& cell = m_grid[row * cols + c];
      const Cell& left = m_grid[row * cols + c - 1];
      if (cell.sample == nullptr || left.sample == nullptr) continue;
      cell.left = left.sample;
      cell.changed = cell.sample->text != left.sample->text;
      m_rowChanged[row] = m_rowChanged[row] || cell.changed;
    }
  }
}

const SamplesModel::Cell* SamplesModel::cellAt(int row, int column) const {
  if (row < 0 || row >= m_rows || column < 1 || column > m_columns.size()) return nullptr;
  return &m_grid[row * m_columns.size() + column - 1];
}

// One format range per word: changed, wrong or both (merged, so ranges never overlap).
void SamplesModel::format(const Cell& cell) const {
  if (cell.formatted) return;
  cell.formatted = true;
  const QString& text = cell.sample->text;
  QSet<int> changed;
  QSet<int> wrong;
  if (cell.changed)
    for (const auto& w : samples::changedWords(cell.left->text, text)) changed.insert(w.start);
  if (cell.sample->reference && cell.wrong)
    for (const auto& w : samples::changedWords(*cell.sample->reference, text))
      wrong.insert(w.start);
  quint64 key = qHash(text);
  for (const auto& w : samples::splitWords(text)) {
    const bool c = changed.contains(w.start);
    const bool r = wrong.contains(w.start);
    if (!c && !r) continue;
    QTextCharFormat f;
    if (c) f.merge(changedFormat());
    if (r) f.merge(wrongFormat());
    cell.formats.append({w.start, w.length, f});
    if (c) cell.changedWords << text.mid(w.start, w.length);
    if (r) cell.wrongWords << text.mid(w.start, w.length);
    key = key * 1000003u + quint64(w.start) * 4 + (c ? 1 : 0) + (r ? 2 : 0);
  }
  cell.key = key;
}

backend::VerdictCounts SamplesModel::verdictCounts(qint64 runId) const {
  backend::VerdictCounts counts;
  for (const backend::Verdict v : m_verdicts.value(runId))
    ++(v == backend::Verdict::good ? counts.good : counts.bad);
  return counts;
}

bool SamplesModel::rowChanged(int row) const { return m_rowChanged.value(row, false); }
bool SamplesModel::rowWrong(int row) const { return m_rowWrong.value(row, false); }

int SamplesModel::columnOf(qint64 runId, qint64 step) const {
  int found = -1;
  for (qsizetype c = 0; c < m_columns.size(); ++c) {
    if (m_columns[c].run != runId) continue;
    if (step < 0 || m_columns[c].step == step) found = int(c) + 1;
  }
  return found;
}

int SamplesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : m_rows;
}

int SamplesModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_columns.size()) + 1;
}

QVariant SamplesModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_rows) return {};
  if (role == ProbeRole) return m_probes[index.row()].id;
  if (index.column() == 0) {
    const Probe& p = m_probes[index.row()];
    switch (role) {
      case Qt::DisplayRole:
        return p.prompt;
      case ReferenceRole:
        return p.reference;
      case Qt::ToolTipRole:
        return p.reference.isEmpty() ? tr("%1: %2").arg(p.id, p.prompt)
                                     : tr("%1: %2\nreference: %3").arg(p.id, p.prompt, p.reference);
      case ThumbnailsRole: {
        QList<QImage> thumbs;
        for (const QString& path : p.images)
          if (const auto it = m_thumbnails.constFind(path); it != m_thumbnails.constEnd())
            thumbs << *it;
        return QVariant::fromValue(thumbs);
      }
      case LayoutKeyRole:
        return quint64(qHash(p.prompt) ^ (qHash(p.reference) << 1));
      default:
        return {};
    }
  }
  const Cell* cell = cellAt(index.row(), index.column());
  if (cell == nullptr) return {};
  if (role == RunRole) return m_columns[index.column() - 1].run;
  if (role == StepRole) return cell->sample ? cell->sample->step : qint64(-1);
  if (cell->sample == nullptr) return {};
  const SampleCell& s = *cell->sample;
  if (role == VerdictRole) {
    const auto run = m_verdicts.constFind(m_columns[index.column() - 1].run);
    if (run == m_verdicts.constEnd()) return 0;
    const auto mark = run->constFind({s.probe, s.step});
    if (mark == run->constEnd()) return 0;
    return *mark == backend::Verdict::good ? 1 : -1;
  }
  switch (role) {
    case Qt::DisplayRole:
      return s.text;
    case Qt::ToolTipRole:
      return tr("%1\n\n%2").arg(s.text, scoreText(s));
    case ScoresRole:
      return scoreText(s);
    case ChangedRole:
      return cell->changed;
    case WrongRole:
      return cell->wrong;
    case FormatsRole:
      format(*cell);
      return QVariant::fromValue(cell->formats);
    case ChangedWordsRole:
      format(*cell);
      return cell->changedWords;
    case WrongWordsRole:
      format(*cell);
      return cell->wrongWords;
    case LayoutKeyRole:
      format(*cell);
      return cell->key;
    default:
      return {};
  }
}

QVariant SamplesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  if (orientation == Qt::Vertical)
    return section < m_rows ? QVariant(m_probes[section].id) : QVariant();
  if (section == 0) return tr("probe");
  if (section > m_columns.size()) return {};
  const Column& c = m_columns[section - 1];
  if (!m_trials) return tr("step %1").arg(c.step);
  const QString name = m_names.value(c.run, tr("run %1").arg(c.run));
  if (c.step < 0) return tr("%1\nno answers yet").arg(name);
  return c.best ? tr("%1\nstep %2 (best)").arg(name).arg(c.step)
                : tr("%1\nstep %2 (last)").arg(name).arg(c.step);
}

void SamplesFilter::setChangedOnly(bool on) {
  m_changed = on;
  invalidateRowsFilter();
}

void SamplesFilter::setWrongOnly(bool on) {
  m_wrong = on;
  invalidateRowsFilter();
}

bool SamplesFilter::filterAcceptsRow(int row, const QModelIndex& parent) const {
  const auto* model = qobject_cast<const SamplesModel*>(sourceModel());
  if (model == nullptr || parent.isValid()) return true;
  if (m_changed && !model->rowChanged(row)) return false;
  if (m_wrong && !model->rowWrong(row)) return false;
  return true;
}

}  // namespace shardscope::ui
