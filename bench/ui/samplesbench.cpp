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

// One configuration's figures: fills and pages over 3 repeats, each in a fresh panel (empty
// caches), with the delegate's pixel cache on or off (off: each cell painted from its laid-out
// text every frame, as before the cache).
struct Figures {
  std::vector<double> fill, downCold, downWarm, acrossCold, acrossWarm, still;
  qint64 layouts = 0;
  qint64 rendered = 0;
};

Figures measure(ui::RunLog& runLog, const ui::SamplesDelta& delta, bool pixelCache) {
  Figures f;
  for (int r = 0; r < 3; ++r) {
    ui::SamplesPanel panel(runLog);
    panel.delegate()->setPixelCacheEnabled(pixelCache);
    panel.resize(1400, 800);
    panel.show();
    QCoreApplication::processEvents();
    panel.setRuns({kRun});
    QElapsedTimer t;
    t.start();
    panel.model()->apply(delta);
    panel.view()->viewport()->grab();
    f.fill.push_back(msSince(t));
    QTableView* view = panel.view();
    scrollPages(view, view->verticalScrollBar(), 10, f.downCold, f.downWarm);
    scrollPages(view, view->horizontalScrollBar(), 5, f.acrossCold, f.acrossWarm);
    // The same page painted again, nothing changed (a hover, a live update elsewhere).
    for (int i = 0; i < 10; ++i) {
      QElapsedTimer still;
      still.start();
      view->viewport()->grab();
      f.still.push_back(msSince(still));
    }
    f.layouts = panel.delegate()->layoutsBuilt();
    f.rendered = panel.delegate()->cellsRendered();
  }
  return f;
}

void samplesFigures(int probes, int columns) {
  std::printf("\n== Samples view: %d probes x %d columns, %d words per answer, 1400x800 ==\n",
              probes, columns, kWords);
  const ui::SamplesDelta delta = makeDelta(probes, columns);
  ui::RunLog runLog;  // not opened: the delivery is handed to the model as the worker would
  const Figures cached = measure(runLog, delta, true);
  const Figures layoutOnly = measure(runLog, delta, false);
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
  const auto maxOf = [](const std::vector<double>& v) {
    return *std::max_element(v.begin(), v.end());
  };
  for (const auto& [name, f] : {std::pair<const char*, const Figures&>{"pixel cache", cached},
                                {"layouts only (no pixel cache)", layoutOnly}}) {
    std::printf("-- %s --\n", name);
    std::printf(
        "fill (delivery -> model -> first painted frame): median %.1f ms of 3 (%.1f, %.1f, %.1f)\n",
        median(f.fill), f.fill[0], f.fill[1], f.fill[2]);
    std::printf("page down, painted the first time: median %.1f ms, max %.1f ms (%zu pages)\n",
                median(f.downCold), maxOf(f.downCold), f.downCold.size());
    std::printf("page up again, over pages painted before: median %.1f ms, max %.1f ms\n",
                median(f.downWarm), maxOf(f.downWarm));
    std::printf("page right: median %.1f ms, max %.1f ms; page left: median %.1f ms, max %.1f ms\n",
                median(f.acrossCold), maxOf(f.acrossCold), median(f.acrossWarm),
                maxOf(f.acrossWarm));
    std::printf("the same page again, unchanged: median %.1f ms, max %.1f ms\n", median(f.still),
                maxOf(f.still));
    std::printf(
        "last repeat: %lld text layouts built, %lld cells painted afresh (target: a frame "
        "< 16 ms)\n",
        static_cast<long long>(f.layouts), static_cast<long long>(f.rendered));
  }
  std::printf(
      "peer, Qt's plain delegate (text only): page down median %.1f ms, up %.1f ms; ratios "
      "Samples (pixel cache) / plain: down %.2f, up %.2f; pixel cache / layouts only: down %.2f, "
      "up %.2f, same page %.2f\n",
      median(plainDown), median(plainUp), median(cached.downCold) / median(plainDown),
      median(cached.downWarm) / median(plainUp),
      median(cached.downCold) / median(layoutOnly.downCold),
      median(cached.downWarm) / median(layoutOnly.downWarm),
      median(cached.still) / median(layoutOnly.still));
}

}  // namespace shardscope::bench
