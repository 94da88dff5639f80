// The Samples view in the dashboard (ui/samples/), under Xvfb, on a real run log: `sample` events
// encoded as a rank writes them, parsed by the monitor's parser and stored through
// RunStore::ingest as a followed run's are, with a probe image in the run directory. The main
// window shows the newest run's answers: one row per probe, one column per evaluation, the
// changed words and the words not in the reference highlighted (in the model's format ranges and
// on screen), the filters, a new evaluation ingested while the view is open, and a click on a
// trial in Compare's optimisation history opening the trials as columns with that one selected;
// answers marked good and bad by a person with the keyboard and the context menu, counted and
// kept across a reload of the run log; an unchanged cell repainted from its cached pixels.
#include <qcustomplot.h>

#include <QCheckBox>
#include <QDir>
#include <QDockWidget>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QMenu>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

#include "backend/monitor/eventstream.h"
#include "backend/store/runstore.h"
#include "spec/events.h"
#include "ui/compare/comparepanel.h"
#include "ui/mainwindow.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/samples/samplesdelegate.h"
#include "ui/samples/samplesmodel.h"
#include "ui/samples/samplespanel.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {
constexpr int kWaitMs = 20000;  // generous: the reader polls every 50 ms here

struct Answer {
  const char* probe;
  const char* text;
  std::optional<bool> exact;
  double f1 = 0;
  double cer = 0;
};

// The probes: "cat" has an image and a reference, "sum" a reference, "poem" none.
spec::SampleEvent sample(qint64 step, const Answer& a) {
  spec::SampleEvent e;
  e.step = step;
  e.probe = a.probe;
  e.text = a.text;
  e.tokens = qint64(QString(a.text).split(' ').size());
  const std::string probe = a.probe;
  if (probe == "cat") {
    e.prompt = "What animal is this?";
    e.images = {"probes/cat.png"};
    e.reference = "a cat";
  } else if (probe == "sum") {
    e.prompt = "2 + 2 =";
    e.reference = "4";
  } else {
    e.prompt = "Write a line of a poem.";
  }
  if (e.reference) {
    e.exact_match = a.exact;
    e.f1 = a.f1;
    e.cer = a.cer;
  }
  return e;
}

QByteArray lines(const std::vector<spec::SampleEvent>& samples, qint64& seq) {
  QByteArray bytes;
  for (const auto& s : samples)
    bytes += QByteArray::fromStdString(spec::encode_event({{1, 0, seq++, 1.7e9}, s})) + '\n';
  return bytes;
}

void ingest(backend::RunStore& store, qint64 runId, const QByteArray& bytes,
            backend::EventStream& stream) {
  backend::FileChunk chunk = backend::parseEventsChunk(runId, bytes, stream);
  const auto stored = store.ingest(chunk).get();
  if (!stored) qFatal("ingest: %s", stored.message().c_str());
}

template <class T>
T ok(std::future<Result<T>> pending) {
  auto r = pending.get();
  if (!r) qFatal("fixture: %s", r.message().c_str());
  return *r;
}

void ok(std::future<Result<void>> pending) {
  auto r = pending.get();
  if (!r) qFatal("fixture: %s", r.message().c_str());
}

}  // namespace

class TestSamplesView : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  std::unique_ptr<backend::RunStore> m_store;
  qint64 m_runId = 0;
  qint64 m_trialA = 0;
  qint64 m_trialB = 0;
  qint64 m_seq = 0;
  backend::EventStream m_stream;
  std::unique_ptr<MainWindow> m_window;

  SamplesPanel* panel() const { return m_window->samplesPanel(); }
  SamplesModel* model() const { return panel()->model(); }
  int row(const QString& probe) const {
    for (int r = 0; r < model()->rowCount(); ++r)
      if (model()->headerData(r, Qt::Vertical, Qt::DisplayRole).toString() == probe) return r;
    return -1;
  }
  QVariant at(const QString& probe, int column, int role) const {
    return model()->index(row(probe), column).data(role);
  }

  // A main window on the run log, showing the probed run's `rows` probes in the Samples view.
  void openWindow(int rows) {
    m_window.reset();
    m_window = std::make_unique<MainWindow>(nullptr, 50);
    m_window->resize(1400, 900);
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    m_window->openRunLog(m_dir.filePath("runs.db"));
    QTRY_VERIFY_WITH_TIMEOUT(model()->runs() == QList<qint64>{m_runId} && panel()->isLoaded() &&
                                 model()->rowCount() == rows,
                             kWaitMs);
    m_window->dock(QStringLiteral("samples"))->raise();
    QTRY_VERIFY(panel()->view()->isVisible() && panel()->view()->width() > 400);
  }

  // The view's index of the model's cell (probe, column).
  QModelIndex shown(const QString& probe, int column) const {
    return panel()->filter()->mapFromSource(model()->index(row(probe), column));
  }

  // Whether the viewport's pixels hold `color` in the first pixels of `index`'s cell (its edge).
  bool edgeHas(const QModelIndex& index, const QColor& color) const {
    QTableView* view = panel()->view();
    const QImage shot = view->viewport()->grab().toImage();
    const QRect cell = view->visualRect(index);
    const qreal dpr = shot.devicePixelRatio();
    for (int y = cell.top() + 2; y < cell.bottom() - 2; ++y)
      for (int x = cell.left(); x < cell.left() + SamplesDelegate::kVerdictEdge; ++x)
        if (shot.pixelColor(int(x * dpr), int(y * dpr)) == color) return true;
    return false;
  }

  // A sweep of two trials with probe answers at steps 10 and 20 and eval.loss there: trial A is
  // best at step 20, trial B at step 10.
  void makeSweep() {
    backend::ExperimentRecord experiment;
    experiment.name = "probe-sweep";
    experiment.toml = "[search]\nobjective = \"eval.loss\"\n";
    const qint64 exp = ok(m_store->createExperiment(experiment));
    const double losses[2][2] = {{0.9, 0.8}, {0.5, 0.7}};
    const char* texts[2][2] = {{"a dog", "a cat"}, {"a black cat", "a cat"}};
    for (int t = 0; t < 2; ++t) {
      backend::NewRun run;
      run.experimentId = exp;
      run.name = QStringLiteral("trial-%1").arg(QChar('A' + t));
      run.runDir = m_dir.filePath(run.name);
      run.worldSize = 1;
      const qint64 id = ok(m_store->createRun(run));
      (t == 0 ? m_trialA : m_trialB) = id;
      std::vector<backend::MetricRow> rows;
      backend::EventStream stream;
      qint64 seq = 0;
      for (int s = 0; s < 2; ++s) {
        const qint64 step = qint64(10) * (s + 1);
        rows.push_back({id, step, "eval.loss", losses[t][s], 0, 1.7e9});
        const bool right = QString(texts[t][s]) == "a cat";
        ingest(*m_store, id,
               lines({sample(step, {"cat", texts[t][s], right, right ? 1.0 : 0.4})}, seq), stream);
      }
      ok(m_store->appendMetrics(rows));
      ok(m_store->setRunStatus(id, spec::RunStatus::complete, {}, losses[t][1]));
    }
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    auto store = backend::RunStore::open(m_dir.filePath("runs.db"));
    QVERIFY2(store, store ? "" : store.message().c_str());
    m_store = std::move(*store);
    makeSweep();
    // The probed run, newest, so the window selects it on its first load.
    const QString runDir = m_dir.filePath("probed");
    QVERIFY(QDir().mkpath(runDir + "/probes"));
    QImage image(40, 30, QImage::Format_RGB32);
    image.fill(QColor(0x20, 0x60, 0xc0));
    QVERIFY(image.save(runDir + "/probes/cat.png"));
    m_runId = ok(m_store->createRun({std::nullopt, "probed", runDir, {}, 1}));
    ok(m_store->setRunStatus(m_runId, spec::RunStatus::running));
    ingest(*m_store, m_runId,
           lines({sample(10, {"cat", "a black dog", false, 0.4, 0.9}),
                  sample(10, {"sum", "4", true, 1.0, 0.0}), sample(10, {"poem", "roses are red"}),
                  sample(20, {"cat", "a black cat", false, 0.8, 0.6}),
                  sample(20, {"sum", "4", true, 1.0, 0.0}), sample(20, {"poem", "roses are blue"})},
                 m_seq),
           m_stream);

    openWindow(3);
  }

  void oneRowPerProbeOneColumnPerEvaluation() {
    QCOMPARE(model()->columnCount(), 3);
    QCOMPARE(model()->headerData(1, Qt::Horizontal, Qt::DisplayRole).toString(), "step 10");
    QCOMPARE(model()->headerData(2, Qt::Horizontal, Qt::DisplayRole).toString(), "step 20");
    QCOMPARE(at("cat", 0, Qt::DisplayRole).toString(), "What animal is this?");
    QCOMPARE(at("cat", 0, SamplesModel::ReferenceRole).toString(), "a cat");
    QCOMPARE(at("poem", 0, SamplesModel::ReferenceRole).toString(), "");
    QCOMPARE(at("cat", 1, Qt::DisplayRole).toString(), "a black dog");
    QCOMPARE(at("cat", 2, Qt::DisplayRole).toString(), "a black cat");
    QCOMPARE(at("sum", 2, Qt::DisplayRole).toString(), "4");
    QCOMPARE(at("poem", 2, Qt::DisplayRole).toString(), "roses are blue");
    QCOMPARE(at("cat", 1, SamplesModel::ScoresRole).toString(),
             "EM 0 · F1 0.40 · CER 0.90 · 3 tok");
    QCOMPARE(at("poem", 1, SamplesModel::ScoresRole).toString(), "3 tok");
    // The probe image's thumbnail, read by the worker thread from the run directory.
    const auto thumbs = at("cat", 0, SamplesModel::ThumbnailsRole).value<QList<QImage>>();
    QCOMPARE(thumbs.size(), 1);
    QVERIFY(!thumbs[0].isNull() && thumbs[0].width() <= 64);
    QVERIFY(at("sum", 0, SamplesModel::ThumbnailsRole).value<QList<QImage>>().isEmpty());
  }

  void changedAndWrongWordsCarryTheirHighlight() {
    // The first column has nothing to its left: nothing changed; "black dog" is not "a cat".
    QCOMPARE(at("cat", 1, SamplesModel::ChangedWordsRole).toStringList(), QStringList());
    QCOMPARE(at("cat", 1, SamplesModel::WrongWordsRole).toStringList(),
             (QStringList{"black", "dog"}));
    QCOMPARE(at("cat", 2, SamplesModel::ChangedWordsRole).toStringList(), QStringList{"cat"});
    QCOMPARE(at("cat", 2, SamplesModel::WrongWordsRole).toStringList(), QStringList{"black"});
    QVERIFY(at("cat", 2, SamplesModel::ChangedRole).toBool());
    QVERIFY(at("cat", 2, SamplesModel::WrongRole).toBool());
    QVERIFY(!at("sum", 2, SamplesModel::ChangedRole).toBool());
    QVERIFY(!at("sum", 2, SamplesModel::WrongRole).toBool());
    QCOMPARE(
        at("sum", 2, SamplesModel::FormatsRole).value<QList<QTextLayout::FormatRange>>().size(), 0);
    // No reference: changed words only, never wrong ones.
    QCOMPARE(at("poem", 2, SamplesModel::ChangedWordsRole).toStringList(), QStringList{"blue"});
    QCOMPARE(at("poem", 2, SamplesModel::WrongWordsRole).toStringList(), QStringList());

    // The format ranges the delegate lays out: "black" (2..7) wrong, "cat" (8..11) changed (and
    // in the reference).
    const auto formats =
        at("cat", 2, SamplesModel::FormatsRole).value<QList<QTextLayout::FormatRange>>();
    QCOMPARE(formats.size(), 2);
    const QColor amber = SamplesModel::changedFormat().background().color();
    const QColor red = SamplesModel::wrongFormat().foreground().color();
    QCOMPARE(formats[0].start, 2);
    QCOMPARE(formats[0].length, 5);
    QCOMPARE(formats[0].format.foreground().color(), red);
    QVERIFY(formats[0].format.fontUnderline());
    QCOMPARE(formats[0].format.background().style(), Qt::NoBrush);
    QCOMPARE(formats[1].start, 8);
    QCOMPARE(formats[1].length, 3);
    QCOMPARE(formats[1].format.background().color(), amber);
    QCOMPARE(formats[1].format.foreground().style(), Qt::NoBrush);
    QVERIFY(!formats[1].format.fontUnderline());

    // On screen: the view's pixels hold the amber of the changed words and the red of the wrong.
    QTableView* view = panel()->view();
    view->scrollToTop();
    const QImage shot = view->viewport()->grab().toImage();
    QVERIFY(!shot.isNull() && shot.width() > 400);
    bool sawAmber = false;
    bool sawRed = false;
    for (int y = 0; y < shot.height(); ++y) {
      for (int x = 0; x < shot.width(); ++x) {
        const QColor c = shot.pixelColor(x, y);
        sawAmber = sawAmber || c == amber;
        sawRed = sawRed || c == red;
      }
    }
    QVERIFY2(sawAmber && sawRed,
             qPrintable(QStringLiteral("amber %1, red %2").arg(sawAmber).arg(sawRed)));
    QVERIFY(panel()->delegate()->layoutsBuilt() > 0);
    // A repaint reuses the laid-out text.
    const qint64 built = panel()->delegate()->layoutsBuilt();
    view->viewport()->grab();
    QCOMPARE(panel()->delegate()->layoutsBuilt(), built);
  }

  void filtersHideTheRightProbes() {
    QTableView* view = panel()->view();
    panel()->changedFilter()->setChecked(true);  // cat and poem changed at step 20; sum did not
    QCOMPARE(view->model()->rowCount(), 2);
    QVERIFY(row("sum") >= 0);
    QStringList shown;
    for (int r = 0; r < view->model()->rowCount(); ++r)
      shown << view->model()->headerData(r, Qt::Vertical, Qt::DisplayRole).toString();
    QCOMPARE(shown, (QStringList{"cat", "poem"}));
    panel()->changedFilter()->setChecked(false);
    panel()->wrongFilter()->setChecked(true);  // only cat is wrong (poem has no reference)
    QCOMPARE(view->model()->rowCount(), 1);
    QCOMPARE(view->model()->headerData(0, Qt::Vertical, Qt::DisplayRole).toString(), "cat");
    panel()->wrongFilter()->setChecked(false);
    QCOMPARE(view->model()->rowCount(), 3);
  }

  // A new evaluation ingested while the view is open appears as a new column, its changes
  // highlighted against step 20, and the wrong filter takes in the probe it made wrong.
  void followsANewEvaluation() {
    ingest(
        *m_store, m_runId,
        lines({sample(30, {"cat", "a cat", true, 1.0, 0.0}),
               sample(30, {"sum", "5", false, 0.0, 1.0}), sample(30, {"poem", "roses are blue"})},
              m_seq),
        m_stream);
    QTRY_COMPARE_WITH_TIMEOUT(model()->columnCount(), 4, kWaitMs);
    QCOMPARE(model()->headerData(3, Qt::Horizontal, Qt::DisplayRole).toString(), "step 30");
    QCOMPARE(at("cat", 3, Qt::DisplayRole).toString(), "a cat");
    QCOMPARE(at("cat", 3, SamplesModel::ChangedWordsRole).toStringList(), QStringList());
    QVERIFY(at("cat", 3, SamplesModel::ChangedRole).toBool());  // "black" went away
    QVERIFY(!at("cat", 3, SamplesModel::WrongRole).toBool());
    QCOMPARE(at("sum", 3, SamplesModel::ChangedWordsRole).toStringList(), QStringList{"5"});
    QCOMPARE(at("sum", 3, SamplesModel::WrongWordsRole).toStringList(), QStringList{"5"});
    // Both at once: one range, amber and red.
    const auto both =
        at("sum", 3, SamplesModel::FormatsRole).value<QList<QTextLayout::FormatRange>>();
    QCOMPARE(both.size(), 1);
    QCOMPARE(both[0].format.background().color(),
             SamplesModel::changedFormat().background().color());
    QCOMPARE(both[0].format.foreground().color(), SamplesModel::wrongFormat().foreground().color());
    panel()->wrongFilter()->setChecked(true);
    QCOMPARE(panel()->view()->model()->rowCount(), 2);  // cat (steps 10, 20) and now sum
    panel()->wrongFilter()->setChecked(false);
  }

  // A person marks two answers: cat at step 10 good with the G key on the selected cell, sum at
  // step 20 bad through the cell's context menu (a real right click's event, a click on the menu's
  // item). The marks go to the run log through the worker and come back: the cells' verdicts, a
  // green and a red edge on screen, the summary's and the runs table's counts. A new window on
  // the same run log (a reload) shows them again. A repaint of unchanged cells is a blit.
  void marksSurviveAReloadAndCount() {
    QTableView* view = panel()->view();
    view->setFocus();
    view->setCurrentIndex(shown("cat", 1));
    QTest::keyClick(view, Qt::Key_G);
    QTRY_COMPARE_WITH_TIMEOUT(at("cat", 1, SamplesModel::VerdictRole).toInt(), 1, kWaitMs);

    const QModelIndex sum20 = shown("sum", 2);
    view->scrollTo(sum20);
    const QPoint point = view->visualRect(sum20).center();
    QContextMenuEvent menuEvent(QContextMenuEvent::Mouse, point,
                                view->viewport()->mapToGlobal(point));
    QApplication::sendEvent(view->viewport(), &menuEvent);
    QMenu* menu = panel()->verdictMenu();
    QTRY_VERIFY(menu->isVisible());
    QVERIFY(view->selectionModel()->isSelected(sum20));
    QVERIFY(QTest::qWaitForWindowExposed(menu));
    QTest::mouseClick(menu, Qt::LeftButton, Qt::NoModifier,
                      menu->actionGeometry(panel()->markBadAction()).center());
    QTRY_COMPARE_WITH_TIMEOUT(at("sum", 2, SamplesModel::VerdictRole).toInt(), -1, kWaitMs);
    QCOMPARE(at("cat", 1, SamplesModel::VerdictRole).toInt(), 1);  // untouched
    QCOMPARE(at("cat", 2, SamplesModel::VerdictRole).toInt(), 0);
    QVERIFY2(panel()->summary()->text().contains("Marked: 1 good, 1 bad (good rate 50%)"),
             qPrintable(panel()->summary()->text()));
    view->clearSelection();
    view->setCurrentIndex({});
    QVERIFY(edgeHas(shown("cat", 1), SamplesDelegate::goodColor()));
    QVERIFY(edgeHas(shown("sum", 2), SamplesDelegate::badColor()));
    QVERIFY(!edgeHas(shown("cat", 2), SamplesDelegate::goodColor()));
    // The runs table counts the run's marks.
    RunTableModel* runs = m_window->runsPanel()->model();
    QTRY_COMPARE_WITH_TIMEOUT(
        runs->index(runs->rowOf(m_runId), RunTableModel::VerdictsCol).data().toString(),
        QStringLiteral("1 good · 1 bad (50%)"), kWaitMs);

    // Unchanged cells repaint from their pixels: no cell is painted afresh, no text laid out.
    view->viewport()->grab();
    const qint64 rendered = panel()->delegate()->cellsRendered();
    const qint64 built = panel()->delegate()->layoutsBuilt();
    view->viewport()->grab();
    QCOMPARE(panel()->delegate()->cellsRendered(), rendered);
    QCOMPARE(panel()->delegate()->layoutsBuilt(), built);

    // Reloaded: a new window reads the marks back from the run log.
    openWindow(3);
    QTRY_COMPARE_WITH_TIMEOUT(at("cat", 1, SamplesModel::VerdictRole).toInt(), 1, kWaitMs);
    QCOMPARE(at("sum", 2, SamplesModel::VerdictRole).toInt(), -1);
    QVERIFY2(panel()->summary()->text().contains("Marked: 1 good, 1 bad"),
             qPrintable(panel()->summary()->text()));

    // 0 clears the selected mark.
    panel()->view()->setFocus();
    panel()->view()->setCurrentIndex(shown("sum", 2));
    QTest::keyClick(panel()->view(), Qt::Key_0);
    QTRY_COMPARE_WITH_TIMEOUT(at("sum", 2, SamplesModel::VerdictRole).toInt(), 0, kWaitMs);
  }

  // A click on trial B's point in Compare's optimisation history: the Samples view shows the
  // sweep's trials, one column each at its best evaluation by eval.loss, B's selected.
  void aTrialClickedInCompareOpensItsColumn() {
    ComparePanel* compare = m_window->comparePanel();
    m_window->dock(QStringLiteral("compare"))->raise();
    QTRY_VERIFY_WITH_TIMEOUT(compare->isSummaryDrawn() && compare->sweep().trials.size() == 2,
                             kWaitMs);
    QCustomPlot* history = compare->historyPlot();
    QTRY_VERIFY(history->isVisible() && history->width() > 100);
    history->replot();
    int index = -1;
    for (int i = 0; i < compare->sweep().trials.size(); ++i)
      if (compare->sweep().trials[i].runId == m_trialB) index = i;
    QVERIFY(index >= 0);
    const QPoint point(int(history->xAxis->coordToPixel(double(index))),
                       int(history->yAxis->coordToPixel(0.7)));
    QCOMPARE(compare->trialAtHistory(point), m_trialB);
    QTest::mouseClick(history, Qt::LeftButton, Qt::NoModifier, point);
    QTRY_VERIFY_WITH_TIMEOUT(model()->trialsMode() && panel()->isLoaded() &&
                                 model()->columnOf(m_trialB) > 0 && model()->rowCount() == 1,
                             kWaitMs);
    QVERIFY(panel()->view()->isVisible());  // the Samples dock came to the front
    QCOMPARE(model()->runs(), (QList<qint64>{m_trialA, m_trialB}));
    const int a = model()->columnOf(m_trialA);
    const int b = model()->columnOf(m_trialB);
    QCOMPARE(model()->headerData(a, Qt::Horizontal, Qt::DisplayRole).toString(),
             "trial-A\nstep 20 (best)");
    QCOMPARE(model()->headerData(b, Qt::Horizontal, Qt::DisplayRole).toString(),
             "trial-B\nstep 10 (best)");
    QCOMPARE(at("cat", a, Qt::DisplayRole).toString(), "a cat");
    QCOMPARE(at("cat", b, Qt::DisplayRole).toString(), "a black cat");
    QCOMPARE(at("cat", b, SamplesModel::ChangedWordsRole).toStringList(), QStringList{"black"});
    QCOMPARE(panel()->view()->currentIndex().column(), b);
  }
};

QTEST_MAIN(TestSamplesView)
#include "tst_samplesview.moc"
