#include "ui/widgets/candidatetable.h"

#include <QHeaderView>
#include <QJsonValue>

#include <cmath>

namespace shardscope::ui {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

QString valueText(const QJsonValue& v) {
  if (v.isBool()) return v.toBool() ? QStringLiteral("on") : QStringLiteral("off");
  if (v.isDouble()) return QString::number(v.toInteger());
  return v.toString();
}

// The colour that marks a candidate that did not measure (invalid: a measured one's default).
QColor markOf(const QString& status) {
  if (status == QLatin1String("infeasible") || status == QLatin1String("duplicate"))
    return QColor(0x80, 0x80, 0x80);
  if (status == QLatin1String("oom") || status == QLatin1String("failed"))
    return QColor(0xb9, 0x2b, 0x27);
  if (status == QLatin1String("stopped")) return QColor(0xb0, 0x6a, 0x00);
  return {};
}

}  // namespace

CandidateTable::CandidateTable(QWidget* parent) : QTableWidget(parent) {
  setObjectName(QStringLiteral("candidateTable"));
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  setSelectionBehavior(QAbstractItemView::SelectRows);
  verticalHeader()->hide();
  horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  horizontalHeader()->setStretchLastSection(true);
}

void CandidateTable::setAutotune(const AutotuneData& autotune) {
  m_fields.clear();
  for (const AutotuneCandidate& c : autotune.candidates) {
    for (const QString& key : c.settings.keys()) {
      if (!m_fields.contains(key)) m_fields.append(key);
    }
  }
  QStringList headers = {
      tr("#"),
      tr("status"),
      autotune.objective == QLatin1String("mfu") ? tr("MFU") : tr("tokens/s per rank"),
      tr("estimate MiB"),
      tr("peak MiB"),
      tr("run")};
  for (const QString& field : std::as_const(m_fields)) headers << field.section('.', 1);
  clear();
  setColumnCount(int(headers.size()));
  setHorizontalHeaderLabels(headers);
  for (int i = 0; i < m_fields.size(); ++i)
    horizontalHeaderItem(kFirstSetting + i)->setToolTip(m_fields[i]);
  setRowCount(int(autotune.candidates.size()));
  m_winnerRow = -1;
  QFont bold = font();
  bold.setBold(true);
  for (int row = 0; row < autotune.candidates.size(); ++row) {
    const AutotuneCandidate& c = autotune.candidates[row];
    const bool winner = c.number == autotune.winner;
    if (winner) m_winnerRow = row;
    QString status = c.status;
    if (c.status == QLatin1String("duplicate") && c.duplicateOf >= 0)
      status = tr("duplicate of #%1").arg(c.duplicateOf);
    if (winner) status = tr("%1 (winner)").arg(status);
    const double value = autotune.valueOf(c);
    const bool mfu = autotune.objective == QLatin1String("mfu");
    QStringList cells = {
        QString::number(c.number),
        status,
        std::isfinite(value)
            ? (mfu ? QString::number(value, 'f', 4) : QString::number(value, 'f', 0))
            : QStringLiteral("—"),
        c.estimateBytes > 0 ? QString::number(double(c.estimateBytes) / kMiB, 'f', 2)
                            : QStringLiteral("—"),
        c.peakBytes > 0 ? QString::number(double(c.peakBytes) / kMiB, 'f', 2) : QStringLiteral("—"),
        c.runName};
    for (const QString& field : std::as_const(m_fields))
      cells << valueText(c.settings.value(field));
    const QColor mark = markOf(c.status);
    for (int column = 0; column < cells.size(); ++column) {
      auto* item = new QTableWidgetItem(cells[column]);
      if (!c.error.isEmpty()) item->setToolTip(c.error);
      if (mark.isValid()) item->setForeground(mark);
      if (c.status == QLatin1String("infeasible") || c.status == QLatin1String("duplicate")) {
        QFont italic = font();
        italic.setItalic(true);
        item->setFont(italic);
      }
      if (winner) {
        item->setFont(bold);
        item->setBackground(QColor(0xd4, 0xf0, 0xd4));
        item->setForeground(Qt::black);
      }
      setItem(row, column, item);
    }
  }
}

int CandidateTable::rowOf(int number) const {
  for (int row = 0; row < rowCount(); ++row) {
    if (item(row, NumberCol) != nullptr && item(row, NumberCol)->text().toInt() == number)
      return row;
  }
  return -1;
}

QString CandidateTable::statusText(int row) const {
  const QTableWidgetItem* cell = item(row, StatusCol);
  return cell == nullptr ? QString() : cell->text();
}

bool CandidateTable::isWinnerRow(int row) const { return row >= 0 && row == m_winnerRow; }

QString CandidateTable::settingText(int row, const QString& field) const {
  const auto at = m_fields.indexOf(field);
  const QTableWidgetItem* cell = at < 0 ? nullptr : item(row, kFirstSetting + int(at));
  return cell == nullptr ? QString() : cell->text();
}

}  // namespace shardscope::ui
