// The main window is honest about what it shows: a title, the curve plot, and a status line
// saying no run log is open.
#include <QStatusBar>
#include <QTest>

#include "ui/mainwindow.h"
#include "ui/plot/curveplot.h"

using namespace shardscope::ui;

class TestMainWindow : public QObject {
  Q_OBJECT

 private slots:
  void showsTitlePlotAndStatus() {
    MainWindow window;
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QCOMPARE(window.windowTitle(), QString("Shardscope"));
    QVERIFY(window.curvePlot() != nullptr);
    QCOMPARE(window.centralWidget(), static_cast<QWidget*>(window.curvePlot()));
    QCOMPARE(window.statusBar()->currentMessage(), QString("No run log opened yet"));
    QCOMPARE(window.curvePlot()->seriesCount(), 0);
  }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
