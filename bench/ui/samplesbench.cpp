#include "bench/ui/samplesbench.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QRandomGenerator>
#include <QScrollBar>
#include <QStyledItemDelegate>
#include <QTableView>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "ui/data/runlog.h"
#include "ui/samples/samplesdelegate.h"
#include "ui/samples/samplesmodel.h"
#include "ui/samples/samplespanel.h"

namespace shardscope::bench {
namespace {

constexpr qint64 kRun = 1;
constexpr int kWords = 30;

// Every probe's answer at every column's step: a sentence of kWords words, 0-3 words replaced per
// step; probes with an even number have the last answer as their reference.
ui::SamplesDelta makeDelta(int probes, int columns) {
  QRandomGenerator rng(42);
  ui::SamplesDelta delta;
  delta.runIds = {kRun};
  delta.reset = true;
  ui::RunSamples run;
  run.runId = kRun;
  run.name = QStringLiteral("bench");
  run.reset = true;
  std::vector<QStringList> answers(size_t(probes) * size_t(columns));
  for (int p = 0; p < probes; ++p) {
    QStringList words;
    for (int w = 0; w < kWords; ++w) words << QStringLiteral("w%1").arg(rng.bounded(500));
    for (int c = 0; c < columns; ++c) {
      for (int k = int(rng.bounded(4)); k > 0; --k)
        words[int(rng.bounded(kWords))] = QStringLiteral("w%1").arg(rng.bounded(500));
      answers[size_t(p) * size_t(columns) + size_t(c)] = words;
    }
  }
  for (int c = 0; c < columns; ++c) {
    for (int p = 0; p < probes; ++p) {
      ui::SampleCell s;
      s.step = qint64(100) * (c + 1);
      s.probe = QString::number(p + 1);
      s.prompt = QStringLiteral("Describe picture %1 in one sentence.").arg(p + 1);
      s.text = answers[size_t(p) * size_t(columns) + size_t(c)].join(' ');
      s.tokens = kWords;
      if (p % 2 == 0) {
        s.reference = answers[size_t(p) * size_t(columns) + size_t(columns - 1)].join(' ');
        s.exactMatch = s.text == *s.reference;
        s.f1 = 0.5;
        s.cer = 0.4;
      }
      run.samples.append(s);
    }
  }
  delta.runs.append(run);
  return delta;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

double msSince(const QElapsedTimer& t) { return double(t.nsecsElapsed()) / 1e6; }

// Each step of `pages` page-scrolls of `bar` (forward, then back) and its painted frame.
void scrollPages(QTableView* view, QScrollBar* bar, int pages, std::vector<double>& cold,
                 std::vector<double>& warm) {
  for (auto action : {QAbstractSlider::SliderPageStepAdd, QAbstractSlider::SliderPageStepSub}) {
    for (int i = 0; i < pages; ++i) {
      QElapsedTimer t;
      t.start();
      bar->triggerAction(action);
      view->viewport()->grab();
      (action == QAbstractSlider::SliderPageStepAdd ? cold : warm).push_back(msSince(t));
    }
  }
}

}  // namespace

void samplesFigures(int probes, int columns) {
  std::printf("\n== Samples view: %d probes x %d columns, %d words per answer, 1400x800 ==\n",
              probes, columns, kWords);
  const ui::SamplesDelta delta = makeDelta(probes, columns);
  ui::RunLog runLog;  // not opened: the delivery is handed to the model as the worker would
  std::vector<double> fill;
  std::vector<double> downCold;
  std::vector<double> downWarm;
  std::vector<double> acrossCold;
  std::vector<double> acrossWarm;
  qint64 layouts = 0;
  for (int r = 0; r < 3; ++r) {
    ui::SamplesPanel panel(runLog);
    panel.resize(1400, 800);
    panel.show();
    QCoreApplication::processEvents();
    panel.setRuns({kRun});
    QElapsedTimer t;
    t.start();
    panel.model()->apply(delta);
    panel.view()->viewport()->grab();
    fill.push_back(msSince(t));
    QTableView* view = panel.view();
    scrollPages(view, view->verticalScrollBar(), 10, downCold, downWarm);
    scrollPages(view, view->horizontalScrollBar(), 5, acrossCold, acrossWarm);
    layouts = panel.delegate()->layoutsBuilt();
  }
  // Peer: the same view and model with Qt's plain delegate (each cell's text, elided, no
  // highlights, no scores), on the same machine in the same process.
  std::vector<double> plainDown;
  std::vector<double> plainUp;
  {
    ui::SamplesPanel panel(runLog);
    QStyledItemDelegate plain;
    panel.view()->setItemDelegate(&plain);
    panel.resize(1400, 800);
    panel.show();
    QCoreApplication::processEvents();
    panel.setRuns({kRun});
    panel.model()->apply(delta);
    panel.view()->viewport()->grab();
    scrollPages(panel.view(), panel.view()->verticalScrollBar(), 10, plainDown, plainUp);
  }
  std::printf(
      "fill (delivery -> model -> first painted frame): median %.1f ms of 3 (%.1f, %.1f, %.1f)\n",
      median(fill), fill[0], fill[1], fill[2]);
  std::printf("page down, text laid out the first time: median %.1f ms, max %.1f ms (%zu pages)\n",
              median(downCold), *std::max_element(downCold.begin(), downCold.end()),
              downCold.size());
  std::printf("page up again, from cached layouts: median %.1f ms, max %.1f ms\n", median(downWarm),
              *std::max_element(downWarm.begin(), downWarm.end()));
  std::printf("page right: median %.1f ms, max %.1f ms; page left: median %.1f ms, max %.1f ms\n",
              median(acrossCold), *std::max_element(acrossCold.begin(), acrossCold.end()),
              median(acrossWarm), *std::max_element(acrossWarm.begin(), acrossWarm.end()));
  std::printf("text layouts built in the last repeat: %lld (target: a frame < 16 ms)\n",
              static_cast<long long>(layouts));
  std::printf(
      "peer, Qt's plain delegate (text only): page down median %.1f ms, up %.1f ms; ratios "
      "Samples / plain: down %.2f, up %.2f\n",
      median(plainDown), median(plainUp), median(downCold) / median(plainDown),
      median(downWarm) / median(plainUp));
}

}  // namespace shardscope::bench
