// The parallel-coordinates plot's labels (each axis's name under the plot, its lowest and
// highest value at its ends) never overlap and stay inside the plot, for 2 to 20 parameters, in
// the Compare panel's size and in a wide one. Checked on the boxes the labels paint into (their
// geometry after the plot's layout). Before, long names were tick labels centred on each axis:
// the demo's four axes already overlapped in a quarter of the panel.
#include <qcustomplot.h>
#include <QTest>

#include "ui/compare/compareplots.h"
#include "ui/compare/parallellabels.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

// Names as sweeps spell them: dotted sections, some long.
QString paramName(int i) {
  static const QStringList names = {
      "train.learning_rate", "train.warmup_steps",  "train.weight_decay", "lora.rank",
      "lora.alpha",          "lora.dropout",        "optim.beta1",        "optim.beta2",
      "data.max_seq_len",    "train.grad_clip",     "train.batch_size",   "shard.strategy",
      "train.lr_min_ratio",  "lora.target_modules", "eval.every_steps",   "train.label_smoothing",
      "model.attn_dropout",  "train.accumulation",  "optim.eps",          "train.seed"};
  return names[i % names.size()];
}

// `params` parameters (one categorical), `trials` finished trials with spread-out values.
SweepData sweepOf(int params, int trials) {
  SweepData sweep;
  sweep.experimentId = 1;
  sweep.objectiveKey = "eval.loss";
  for (int t = 0; t < trials; ++t) {
    SweepTrial trial;
    trial.runId = t + 1;
    trial.name = QStringLiteral("trial-%1").arg(t);
    trial.status = spec::RunStatus::complete;
    for (int p = 0; p < params; ++p) {
      if (paramName(p) == "shard.strategy") {
        trial.params.insert(paramName(p), t % 2 == 0 ? "FULL_SHARD" : "SHARD_GRAD_OP");
      } else {
        trial.params.insert(paramName(p), 1e-5 * (1 + t) * (p + 1) * 3.7);
      }
    }
    trial.objective = 0.5 + 0.01 * t;
    sweep.trials.append(trial);
  }
  return sweep;
}

}  // namespace

class TestParallelLabels : public QObject {
  Q_OBJECT

 private slots:
  void labelsNeverOverlap_data() {
    QTest::addColumn<int>("params");
    QTest::addColumn<QSize>("size");
    for (const QSize size : {QSize(390, 330), QSize(800, 500)}) {
      for (int params = 2; params <= 20; ++params) {
        QTest::addRow("%d params, %dx%d", params, size.width(), size.height()) << params << size;
      }
    }
  }

  void labelsNeverOverlap() {
    QFETCH(int, params);
    QFETCH(QSize, size);
    QCustomPlot plot;
    compare::setupPlot(&plot, "Parallel coordinates");
    plot.resize(size);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    QCOMPARE(plot.viewport().size(), size);
    QCOMPARE(compare::drawParallel(&plot, sweepOf(params, 12), true), 12);
    plot.replot();
    const QVector<QCPItemText*> labels = compare::parallelLabels(&plot);
    QVector<QRectF> boxes;
    int names = 0;
    for (const QCPItemText* label : labels) {
      boxes.append(compare::itemTextBox(label));
      names += label->font().pointSize() == 8 ? 1 : 0;
    }
    // Every axis is named when each has a line of text's room (params + 1 axes: the objective).
    const double spacing = plot.xAxis->coordToPixel(1) - plot.xAxis->coordToPixel(0);
    if (spacing >= QFontMetrics(labels.first()->font()).height() + 6) QCOMPARE(names, params + 1);
    QVERIFY(names >= 2);
    const QRectF area(plot.rect());
    for (qsizetype i = 0; i < boxes.size(); ++i) {
      QVERIFY2(area.contains(boxes[i]),
               qPrintable(QStringLiteral("%1 %2,%3 %4x%5 rect bottom %6 pad %7 rot %8")
                              .arg(labels[i]->text())
                              .arg(boxes[i].x())
                              .arg(boxes[i].y())
                              .arg(boxes[i].width())
                              .arg(boxes[i].height())
                              .arg(plot.axisRect()->rect().bottom())
                              .arg(plot.xAxis->padding())
                              .arg(labels[i]->rotation())));
      for (qsizetype j = i + 1; j < boxes.size(); ++j) {
        // Touching is fine; sharing a pixel is not.
        const QRectF overlap = boxes[i].intersected(boxes[j]);
        QVERIFY2(
            overlap.width() < 0.5 || overlap.height() < 0.5,
            qPrintable(QStringLiteral("'%1' and '%2'").arg(labels[i]->text(), labels[j]->text())));
      }
    }
    // The names are under the data, not over it.
    for (const QCPItemText* label : labels) {
      if (label->font().pointSize() == 8)
        QVERIFY(compare::itemTextBox(label).top() >= plot.axisRect()->rect().bottom());
    }
  }
};

QTEST_MAIN(TestParallelLabels)
#include "tst_parallellabels.moc"
