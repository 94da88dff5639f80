// What the run-log worker sends the Samples view (ui/samples/): the watched runs' probe answers
// (their `sample` events, eval.probes) as they are ingested, each probe image's thumbnail (read
// off the GUI thread), the people's verdicts on the answers (schema 11), and, when an objective
// is given, the step of each run's best evaluation.
#pragma once

#include <QHash>
#include <QImage>
#include <QList>
#include <QMetaType>
#include <QPair>
#include <QString>
#include <QStringList>
#include <QVector>

#include <optional>

#include "backend/store/verdicts.h"

namespace shardscope::ui {

/// One probe's answer at one evaluation step of one run.
struct SampleCell {
  qint64 step = 0;
  QString probe;       ///< the probe's id
  QString prompt;      ///< the text of its last user turn
  QStringList images;  ///< its images, absolute paths (the run directory's probes/ copies)
  QString text;        ///< what the model generated
  qint64 tokens = 0;
  std::optional<QString> reference;
  std::optional<bool> exactMatch;
  std::optional<double> f1;
  std::optional<double> cer;
};

/// An answer's place in a run: (probe id, step).
using AnswerKey = QPair<QString, qint64>;

/// New answers of one run, in the order rank 0 wrote them (reset: they replace what the view holds
/// of that run, as on the first read or after a retry started a new attempt).
struct RunSamples {
  qint64 runId = -1;
  QString name;
  bool reset = false;
  QVector<SampleCell> samples;
  /// The step whose value of the watched objective is the best (nullopt: no objective asked, or
  /// no value yet).
  std::optional<qint64> bestStep;
  /// The run's verdicts, whole, when they changed since the last delivery (always on the first);
  /// when false, `verdicts` is empty and what the view holds stands.
  bool verdictsChanged = false;
  QHash<AnswerKey, backend::Verdict> verdicts;
};

/// A mark asked for in the Samples view: one answer of one run, good, bad or cleared (nullopt).
struct VerdictEdit {
  qint64 runId = -1;
  QString probe;
  qint64 step = 0;
  std::optional<backend::Verdict> verdict;
};

/// One delivery for the watched runs (reset: the watch changed; runs not in `runs` are empty).
struct SamplesDelta {
  QList<qint64> runIds;  ///< the watch this answers, in the order asked
  bool reset = false;
  QVector<RunSamples> runs;
  QHash<QString, QImage> thumbnails;  ///< absolute image path -> thumbnail, each sent once
};

}  // namespace shardscope::ui

Q_DECLARE_METATYPE(shardscope::ui::SamplesDelta)
