#include "ui/data/verdictstext.h"

#include <QCoreApplication>
#include <QtMath>

namespace shardscope::ui {

QString verdictsText(const backend::VerdictCounts& counts) {
  const auto rate = counts.goodRate();
  if (!rate) return {};
  return QCoreApplication::translate("Verdicts", "%1 good · %2 bad (%3%)")
      .arg(counts.good)
      .arg(counts.bad)
      .arg(qRound(*rate * 100));
}

}  // namespace shardscope::ui
