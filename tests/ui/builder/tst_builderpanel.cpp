// The experiment builder panel driven through its widgets, offscreen: TOML preview and
// round-trip through spec, validation beside the field and launch blocking, undo, the
// memory bars against estimate_memory, the model picker's parameter counts, [search] editing,
// and a screenshot (tests/artifacts/builder-panel.png in the build tree) for people to look at.
#include <qcustomplot.h>
#include <QtTest>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScopeGuard>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableWidget>

#include "data/text/sft.h"
#include "data/text/sft_prepare.h"
#include "search/space.h"
#include "spec/estimate.h"
#include "spec/experiment.h"
#include "tests/data/text/tiny_tokenizer.h"
#include "tests/support/paths.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/builder/memorychart.h"
#include "ui/builder/previewpanel.h"
#include "ui/builder/searcheditor.h"
#include "ui/mainwindow.h"

using namespace shardscope;
using shardscope::ui::BuilderPanel;

namespace {

const QString kQwen = shardscope::testing::sourceDir() + "/examples/models/qwen2-vl-2b";

// Types into a line edit as a user would and leaves it (editingFinished).
void typeInto(BuilderPanel& panel, const QString& path, const QString& text) {
  auto* edit = qobject_cast<QLineEdit*>(panel.editor(path));
  QVERIFY2(edit, qPrintable(path));
  edit->setFocus();
  edit->selectAll();
  QTest::keyClicks(edit, text);
  QTest::keyClick(edit, Qt::Key_Return);
}

void settle(BuilderPanel& panel) {
  panel.controller()->validateNow();
  panel.refreshNow();
}

}  // namespace

class TestBuilderPanel : public QObject {
  Q_OBJECT

  // A copy of the bundled demo in a fresh folder: opening it makes its data there, as a fresh
  // checkout does, and the test never writes into the source tree.
  QTemporaryDir m_demoDir;
  QString m_demo;

 private slots:
  void initTestCase() {
    QVERIFY(m_demoDir.isValid());
    m_demo = m_demoDir.filePath("demo.toml");
    QVERIFY(QFile::copy(shardscope::testing::sourceDir() + "/examples/demo.toml", m_demo));
  }

  void openingTheDemoMakesItsData() {
    const QString data = m_demoDir.filePath("demo-data/train.jsonl");
    QVERIFY(!QFileInfo::exists(data));
    BuilderPanel panel;
    QString error;
    QVERIFY2(panel.controller()->openFile(m_demo, &error), qPrintable(error));
    QFile file(data);
    QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(data));
    const QList<QByteArray> lines = file.readAll().split('\n');
    QCOMPARE(lines.size(), 513);  // 512 samples and the final newline
    QVERIFY(lines.back().isEmpty());
    const QByteArray before = QFileInfo(data).lastModified().toString(Qt::ISODateWithMs).toUtf8();
    QVERIFY(panel.controller()->openFile(m_demo, &error));  // a second open keeps the file
    QCOMPARE(QFileInfo(data).lastModified().toString(Qt::ISODateWithMs).toUtf8(), before);
  }

  void openDemoEditAndRoundTrip() {
    BuilderPanel panel;
    QString error;
    QVERIFY2(panel.controller()->openFile(m_demo, &error), qPrintable(error));
    settle(panel);
    auto* lr = qobject_cast<QLineEdit*>(panel.editor("train.lr"));
    QCOMPARE(lr->text(), QStringLiteral("0.01"));
    QCOMPARE(qobject_cast<QComboBox*>(panel.editor("shard.strategy"))->currentText(),
             QStringLiteral("FULL_SHARD"));
    QCOMPARE(qobject_cast<QSpinBox*>(panel.editor("launch.nproc_per_node"))->value(), 2);
    QVERIFY(panel.launchButton()->isEnabled());
    const QString before = panel.tomlPreview()->toPlainText();
    QVERIFY(before.contains(QRegularExpression("\\nlr = 0\\.01 ")));

    typeInto(panel, "train.lr", "0.002");
    qobject_cast<QComboBox*>(panel.editor("shard.strategy"))->setCurrentText("SHARD_GRAD_OP");
    qobject_cast<QSpinBox*>(panel.editor("train.max_steps"))->setValue(50);
    qobject_cast<QCheckBox*>(panel.editor("shard.activation_checkpointing"))->setChecked(true);
    typeInto(panel, "lora.target_modules", "q_proj, v_proj");
    settle(panel);
    const QString after = panel.tomlPreview()->toPlainText();
    QVERIFY(after != before);
    QVERIFY(after.contains(QRegularExpression("\\nlr = 0\\.002 ")));
    QVERIFY(after.contains("strategy = \"SHARD_GRAD_OP\""));
    QCOMPARE(panel.controller()->undoStack()->count(), 5);  // one command per field edit

    // The preview is exactly what spec parses back into the same experiment.
    auto parsed = spec::parse_experiment(after.toStdString(), m_demo.toStdString());
    QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.message().c_str());
    QVERIFY(*parsed == panel.controller()->experiment());
    QCOMPARE(parsed->train.lr, 0.002);
    QCOMPARE(parsed->train.max_steps, 50);
    QCOMPARE(parsed->lora.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
    QVERIFY(parsed->shard.activation_checkpointing);

    QTemporaryDir dir;
    const QString saved = dir.filePath("edited.toml");
    QVERIFY2(panel.controller()->saveFile(saved, &error), qPrintable(error));
    auto loaded = spec::load_experiment(saved.toStdString());
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.message().c_str());
    QVERIFY(*loaded == panel.controller()->experiment());
    settle(panel);
    QCOMPARE(panel.commandPreview()->text(), "shardscope-cli run " + saved);
  }

  void invalidValueShowsSpecMessageAndBlocksLaunch() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    settle(panel);
    QSignalSpy allowed(panel.controller(), &ui::BuilderController::launchAllowedChanged);
    typeInto(panel, "train.lr", "-0.1");
    // Validation is debounced: it arrives on its own after the edit.
    QTRY_VERIFY_WITH_TIMEOUT(!panel.controller()->launchAllowed(), 10000);
    panel.refreshNow();
    QLabel* label = panel.messageLabel("train.lr");
    QVERIFY(!label->isHidden());
    // The text beside the field is spec's own message for it.
    spec::Experiment exp = panel.controller()->experiment();
    auto spec_says = spec::validate_for_launch(exp);
    QVERIFY(!spec_says.ok());
    QVERIFY2(label->text().startsWith("train.lr: "), qPrintable(label->text()));
    QVERIFY(QString::fromStdString(spec_says.message()).contains(label->text()));
    QVERIFY(!panel.launchButton()->isEnabled());
    QCOMPARE(allowed.count(), 1);
    QVERIFY(panel.messageLabel("train.batch_size")->isHidden());

    panel.controller()->undoStack()->undo();
    settle(panel);
    QCOMPARE(qobject_cast<QLineEdit*>(panel.editor("train.lr"))->text(), QStringLiteral("0.01"));
    QVERIFY(label->isHidden());
    QVERIFY(panel.launchButton()->isEnabled());
    QVERIFY(panel.controller()->launchAllowed());
  }

  void hybridShardOnOneNodeNamesTheStrategy() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    qobject_cast<QComboBox*>(panel.editor("shard.strategy"))->setCurrentText("HYBRID_SHARD");
    qobject_cast<QSpinBox*>(panel.editor("launch.nproc_per_node"))->setValue(3);
    settle(panel);
    QLabel* label = panel.messageLabel("shard.strategy");
    QVERIFY(!label->isHidden());
    QVERIFY2(label->text().contains("HYBRID_SHARD"), qPrintable(label->text()));
    // 8 samples over 3 ranks: the batch rule names train.batch_size.
    QVERIFY(panel.messageLabel("train.batch_size")->text().contains("do not split evenly"));
    QVERIFY(!panel.launchButton()->isEnabled());
    QSignalSpy launched(panel.controller(), &ui::BuilderController::launchRequested);
    panel.launchButton()->click();        // disabled: nothing happens
    panel.controller()->requestLaunch();  // and the controller refuses too
    QCOMPARE(launched.count(), 0);
  }

  void typeErrorIsRefusedWithTheReadersMessage() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    settle(panel);
    const int commands = panel.controller()->undoStack()->count();
    typeInto(panel, "train.lr", "fast");
    QVERIFY(!panel.messageLabel("train.lr")->isHidden());
    QVERIFY2(panel.messageLabel("train.lr")->text().contains("train.lr"),
             qPrintable(panel.messageLabel("train.lr")->text()));
    QCOMPARE(panel.controller()->undoStack()->count(), commands);
    QCOMPARE(panel.controller()->experiment().train.lr, 0.01);
  }

  void memoryBarsEqualTheEstimate() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    qobject_cast<QSpinBox*>(panel.editor("launch.nproc_per_node"))->setValue(4);
    settle(panel);
    const auto& exp = panel.controller()->experiment();
    auto est = spec::estimate_memory(exp, 4, 4);
    QVERIFY2(est.ok(), est.ok() ? "" : est.message().c_str());
    auto* chart = panel.memoryChart();
    QCOMPARE(chart->rankCount(), 4);
    for (int r = 0; r < 4; ++r) {
      QCOMPARE(chart->stackBytes(r), est->total);
      QCOMPARE(chart->barBytes(ui::MemoryChart::Params, r), est->params);
      QCOMPARE(chart->barBytes(ui::MemoryChart::Optimizer, r), est->optimizer);
      QCOMPARE(chart->barBytes(ui::MemoryChart::Activations, r),
               chart->headMoment() ? est->activations : 0);
    }
    QVERIFY(!chart->overBudget());
    chart->setBudgetGiB(static_cast<double>(est->total) / 2 / (1024.0 * 1024.0 * 1024.0));
    QVERIFY(chart->overBudget());
    QVERIFY(chart->statusText().contains("OVER BUDGET"));

    // Nothing covers the bars or the budget's label: the legend is a row of its own under the
    // chart, for a budget near the bars and one far above them.
    panel.resize(1400, 900);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    for (const double gib :
         {static_cast<double>(est->total) / 2 / (1024.0 * 1024.0 * 1024.0), 24.0}) {
      chart->setBudgetGiB(gib);
      chart->plot()->replot();
      const QRect data = chart->plot()->axisRect()->rect();
      const QRect legend = chart->plot()->legend->outerRect();
      QVERIFY2(!legend.intersects(data), "the legend overlaps the chart");
      QCPItemText* label = chart->budgetLabel();
      // The box it is drawn in, whatever its alignment.
      const QRect box = QRectF(label->topLeft->pixelPosition(), label->bottomRight->pixelPosition())
                            .toAlignedRect();
      QVERIFY2(!box.intersects(legend), qPrintable(label->text()));
      QVERIFY2(data.contains(box.topLeft()) || data.contains(box.bottomLeft()),
               qPrintable(label->text() + ": drawn outside the chart " +
                          QStringLiteral("%1,%2 %3x%4 in %5,%6 %7x%8")
                              .arg(box.x())
                              .arg(box.y())
                              .arg(box.width())
                              .arg(box.height())
                              .arg(data.x())
                              .arg(data.y())
                              .arg(data.width())
                              .arg(data.height())));
    }
  }

  // The memory chart as a new user meets it: the dashboard at 1600x1000, the Builder in front,
  // New from template > demo. There the chart gets a data area a few dozen pixels high, and its
  // budget label (bottom-aligned 8% down) stood above it, clipped to its lower half, while the
  // y label "bytes per rank (MiB)" was longer than the axis and drew cut ("bytes per rank (M").
  // Now the label lies whole inside the data area, above the bars and the budget line, for a
  // budget far above the bars and one at their top, and the y label fits its axis.
  void memoryChartReadsWholeInTheDashboard() {
    // The window's settings (its layout) in a test location, for this test only: the others
    // read $XDG_DATA_HOME as a user's session does.
    QStandardPaths::setTestModeEnabled(true);
    const auto userPaths = qScopeGuard([] { QStandardPaths::setTestModeEnabled(false); });
    ui::MainWindow window(nullptr, 50);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.dock("builder")->raise();
    BuilderPanel* panel = window.builderPanel();
    QString error;
    QVERIFY2(panel->controller()->loadTemplate("demo", &error), qPrintable(error));
    settle(*panel);
    ui::MemoryChart* chart = panel->memoryChart();
    QVERIFY(chart->rankCount() > 0);
    QVERIFY(chart->isVisible());
    QCustomPlot* plot = chart->plot();
    const double total = static_cast<double>(chart->stackBytes(0));
    for (const double budget : {total * 1000, total}) {
      chart->setBudgetGiB(budget / (1024.0 * 1024.0 * 1024.0));
      plot->replot();
      const QRect data = plot->axisRect()->rect();
      QCPItemText* label = chart->budgetLabel();
      const QRectF box(label->topLeft->pixelPosition(), label->bottomRight->pixelPosition());
      const QString where = QStringLiteral("%1: %2,%3 %4x%5 in the data area %6,%7 %8x%9")
                                .arg(label->text())
                                .arg(box.x())
                                .arg(box.y())
                                .arg(box.width())
                                .arg(box.height())
                                .arg(data.x())
                                .arg(data.y())
                                .arg(data.width())
                                .arg(data.height());
      QVERIFY2(QRectF(data).adjusted(-1, -1, 1, 1).contains(box), qPrintable(where));
      // The bars and the budget line (to scale: at `budget`) end below the label.
      double top = 0;
      for (int i = 0; i < plot->plottableCount(); ++i) {
        if (auto* bars = qobject_cast<QCPBars*>(plot->plottable(i));
            bars && !bars->data()->isEmpty())
          top += bars->data()->constBegin()->value;
      }
      QVERIFY2(plot->yAxis->coordToPixel(top) >= box.bottom(), qPrintable(where));
      if (budget == total) {
        const double unit = total / top;  // bytes per unit of the axis
        QVERIFY2(plot->yAxis->coordToPixel(budget / unit) >= box.bottom(), qPrintable(where));
      }
      const int labelLength =
          QFontMetrics(plot->yAxis->labelFont()).horizontalAdvance(plot->yAxis->label());
      QVERIFY2(labelLength <= data.height(),
               qPrintable(QStringLiteral("y label \"%1\" is %2 px on an axis of %3 px")
                              .arg(plot->yAxis->label())
                              .arg(labelLength)
                              .arg(data.height())));
    }
  }

  // QLoRA in the LoRA tab: quantize and quant_storage are picked from what validation accepts,
  // and switching the demo's LoRA run to nf4 lowers the charted params (the frozen base as NF4
  // records instead of fp32 masters) while grads and optimizer stay, with the legend and the
  // status naming the NF4 base.
  void quantizingTheLoraBaseLowersTheChartedParams() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    auto* enabled = qobject_cast<QCheckBox*>(panel.editor("lora.enabled"));
    QVERIFY(enabled);
    enabled->setChecked(true);
    settle(panel);
    auto* chart = panel.memoryChart();
    QVERIFY2(chart->rankCount() == 2, qPrintable(chart->statusText()));
    const auto plainParams = chart->barBytes(ui::MemoryChart::Params, 0);
    const auto plainOptimizer = chart->barBytes(ui::MemoryChart::Optimizer, 0);
    const auto plainStack = chart->stackBytes(0);
    QVERIFY(!chart->statusText().contains("NF4"));

    auto* quantize = qobject_cast<QComboBox*>(panel.editor("lora.quantize"));
    QVERIFY2(quantize, "lora.quantize is not a combo box");
    QCOMPARE(quantize->count(), 2);
    QCOMPARE(quantize->itemText(1), QStringLiteral("nf4"));
    auto* storage = qobject_cast<QComboBox*>(panel.editor("lora.quant_storage"));
    QVERIFY2(storage, "lora.quant_storage is not a combo box");
    QCOMPARE(storage->count(), 4);
    QVERIFY(qobject_cast<QCheckBox*>(panel.editor("lora.double_quant")));
    // The demo's width (32) is a whole number of blocks of 32, not of the default 64.
    auto* block = qobject_cast<QSpinBox*>(panel.editor("lora.quant_block_size"));
    QVERIFY(block);
    quantize->setCurrentText("nf4");
    block->setValue(32);
    settle(panel);
    const auto& lora = panel.controller()->experiment().lora;
    QCOMPARE(lora.quantize, std::string("nf4"));
    QCOMPARE(lora.quant_block_size, std::int64_t{32});
    QVERIFY(panel.controller()->tomlText().contains("quantize = \"nf4\""));
    QVERIFY2(chart->rankCount() == 2, qPrintable(chart->statusText()));
    auto est = spec::estimate_memory(panel.controller()->experiment(), 2, 2);
    QVERIFY2(est.ok(), est.ok() ? "" : est.message().c_str());
    QVERIFY(est->nf4 > 0);
    QCOMPARE(chart->barBytes(ui::MemoryChart::Params, 0), est->params);
    QVERIFY2(chart->barBytes(ui::MemoryChart::Params, 0) < plainParams,
             qPrintable(QStringLiteral("%1 >= %2")
                            .arg(chart->barBytes(ui::MemoryChart::Params, 0))
                            .arg(plainParams)));
    QCOMPARE(chart->barBytes(ui::MemoryChart::Optimizer, 0), plainOptimizer);
    QVERIFY(chart->stackBytes(0) < plainStack);
    QVERIFY2(chart->statusText().contains("NF4"), qPrintable(chart->statusText()));
    QVERIFY(chart->plot()->plottable(0)->name().contains("NF4"));

    // Back to none: the chart returns to plain LoRA's figures.
    block->setValue(64);
    quantize->setCurrentText("none");
    settle(panel);
    QCOMPARE(chart->barBytes(ui::MemoryChart::Params, 0), plainParams);
    QVERIFY(!chart->plot()->plottable(0)->name().contains("NF4"));
  }

  // The panel names its budget and where it comes from (launch.device_memory_gib here), says
  // when Slurm lacks it, and shows a model folder's error (no config.json) instead of bars.
  void memoryPanelNamesTheBudgetAndBadModelFolders() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QFile data(dir.filePath("train.jsonl"));
    QVERIFY(data.open(QIODevice::WriteOnly));
    data.close();
    QVERIFY(QDir(dir.path()).mkdir("empty"));
    const QString text = QStringLiteral(
                             "[model]\narch = \"qwen2_vl\"\npath = \"%1\"\n[data]\n"
                             "train_path = \"train.jsonl\"\nformat = \"chat\"\n"
                             "[launch]\nnproc_per_node = 2\n%2")
                             .arg(kQwen);
    const QString local = dir.filePath("local.toml");
    QFile f(local);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text.arg("device_memory_gib = 40\n").toUtf8());
    f.close();
    BuilderPanel panel;
    QString error;
    QVERIFY2(panel.controller()->openFile(local, &error), qPrintable(error));
    settle(panel);
    auto* chart = panel.memoryChart();
    QCOMPARE(chart->budgetSource(), QString("launch.device_memory_gib = 40"));
    QCOMPARE(chart->budgetBytes(), 40.0 * 1024 * 1024 * 1024);
    QCOMPARE(chart->rankCount(), 2);
    QVERIFY2(chart->statusText().startsWith("Peak"), qPrintable(chart->statusText()));
    typeInto(panel, "model.path", dir.filePath("empty"));
    settle(panel);
    QVERIFY2(chart->statusText().contains(dir.filePath("empty/config.json")),
             qPrintable(chart->statusText()));

    const QString slurm = dir.filePath("slurm.toml");
    QFile g(slurm);
    QVERIFY(g.open(QIODevice::WriteOnly));
    g.write(text.arg("kind = \"slurm\"\n").toUtf8());
    g.close();
    BuilderPanel other;
    QVERIFY2(other.controller()->openFile(slurm, &error), qPrintable(error));
    settle(other);
    QVERIFY2(other.memoryChart()->budgetSource().contains(
                 "launch.device_memory_gib: required for launch.kind = \"slurm\""),
             qPrintable(other.memoryChart()->budgetSource()));
    QVERIFY2(other.memoryChart()->statusText().contains("No budget"),
             qPrintable(other.memoryChart()->statusText()));
  }

  // Every reason there is no estimate used to be listed, word-wrapped, under the chart: each one
  // raised the Builder's minimum height, and a stored experiment with two errors made the main
  // window taller than the 1000 px it was given (tst_plotsview, on a loaded machine).
  void manyReasonsKeepTheStatusOneReasonLong() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("old.toml");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("[search]\nobjective = \"eval.loss\"\n");  // no data.train_path, an unknown key
    f.close();
    BuilderPanel panel;
    QString error;
    QVERIFY2(panel.controller()->openFile(path, &error), qPrintable(error));
    settle(panel);
    const QString status = panel.memoryChart()->statusText();
    const QString tip = panel.memoryChart()->statusToolTip();
    QVERIFY2(status.startsWith("No estimate: ") && status.contains("and 1 more: hover for all"),
             qPrintable(status));
    QVERIFY2(!status.contains("search.objective") && !status.contains('\n'), qPrintable(status));
    QVERIFY2(tip.contains("data.train_path") && tip.contains("search.objective"), qPrintable(tip));
  }

  void modelPickerShowsParameterCounts() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    qobject_cast<QComboBox*>(panel.editor("model.arch"));  // arch is a string field
    typeInto(panel, "model.arch", "qwen2_vl");
    typeInto(panel, "model.path", kQwen);
    settle(panel);
    QCOMPARE(panel.previewPanel()->totalParams(), std::int64_t(2'208'985'600));
    QVERIFY2(panel.previewPanel()->modelText().contains("2,208,985,600"),
             qPrintable(panel.previewPanel()->modelText()));
    QVERIFY(panel.messageLabel("model.path")->isHidden());
  }

  void dataPreviewShowsFirstSamples() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    settle(panel);
    const QString text = panel.previewPanel()->dataText();
    QVERIFY2(text.contains("sample 0: 32 tokens"), qPrintable(text));
    QFile file(m_demoDir.filePath("demo-data/train.jsonl"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const auto first = QJsonDocument::fromJson(file.readLine()).object()["input_ids"].toArray();
    QCOMPARE(first.size(), 32);
    const QString leading = QStringLiteral("%1 %2 %3")
                                .arg(first[0].toInt())
                                .arg(first[1].toInt())
                                .arg(first[2].toInt());
    QVERIFY2(text.contains(leading), qPrintable(leading + " in " + text));
  }

  // Chat data with the model's tokenizer: the preview says how its first samples fill rows. Eight
  // equal samples of n tokens, seq_len 2n + 1, a step of 8: packed, 4 rows (two samples each);
  // one a row, every slot real.
  void dataPreviewShowsHowChatSamplesPack() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QVERIFY(QDir(dir.path()).mkdir("model"));
    QVERIFY(QFile::copy(kQwen + "/config.json", dir.filePath("model/config.json")));
    QFile tokenizer(dir.filePath("model/tokenizer.json"));
    QVERIFY(tokenizer.open(QIODevice::WriteOnly));
    tokenizer.write(QByteArray::fromStdString(tiny::document().dump()));
    tokenizer.close();
    QFile data(dir.filePath("train.jsonl"));
    QVERIFY(data.open(QIODevice::WriteOnly));
    const QByteArray line =
        R"({"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"abc"}]})";
    for (int i = 0; i < 8; ++i) data.write(line + "\n");
    data.close();
    auto preparer = data::SftPreparer::open(dir.filePath("model").toStdString());
    QVERIFY2(preparer.ok(), preparer.ok() ? "" : preparer.message().c_str());
    auto record = data::parse_sft_record(nlohmann::json::parse(line.toStdString()), "");
    QVERIFY(record.ok());
    auto prepared = preparer->prepare(*record);
    QVERIFY2(prepared.ok(), prepared.ok() ? "" : prepared.message().c_str());
    const auto n = static_cast<qint64>(prepared->input_ids.size());
    const QString text = QStringLiteral(
                             "[model]\narch = \"qwen2_vl\"\npath = \"model\"\n[data]\n"
                             "train_path = \"train.jsonl\"\nformat = \"chat\"\nseq_len = %1\n"
                             "pack = %2\n[train]\nbatch_size = 8\n")
                             .arg(2 * n + 1);
    for (const bool pack : {true, false}) {
      const QString path = dir.filePath(pack ? "packed.toml" : "unpacked.toml");
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(text.arg(pack ? "true" : "false").toUtf8());
      f.close();
      BuilderPanel panel;
      QString error;
      QVERIFY2(panel.controller()->openFile(path, &error), qPrintable(error));
      settle(panel);
      const QString shown = panel.previewPanel()->dataText();
      // The launch's default 2 ranks: shares of 4 samples, two rows a rank a step.
      const QString rows =
          QStringLiteral("packed, 4 rows of %1 tokens, 2.0 a rank a step").arg(2 * n + 1);
      QVERIFY2(shown.contains(rows), qPrintable(rows + " in " + shown));
      QVERIFY2(shown.contains(QStringLiteral("the first 8 samples (%1 tokens)").arg(8 * n)),
               qPrintable(shown));
      QVERIFY2(shown.contains("padded to each micro-batch's longest, 100% real tokens"),
               qPrintable(shown));
      QVERIFY2(
          shown.contains(pack ? "Packing (data.pack = true)" : "No packing (data.pack = false)"),
          qPrintable(shown));
    }
  }

  void searchTableWritesParsableToml() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    QCOMPARE(panel.controller()->commandLine(), "shardscope-cli run " + m_demo);
    panel.searchEditor()->addParam("train.lr", "float");
    settle(panel);
    const auto& exp = panel.controller()->experiment();
    QVERIFY(exp.search.present);
    // Launch starts it as a sweep now, and the command line says so.
    QCOMPARE(panel.controller()->commandLine(), "shardscope-cli sweep " + m_demo);
    auto space = search::parse_search_space(exp.search.toml);
    QVERIFY2(space.ok(), space.ok() ? "" : space.message().c_str());
    QCOMPARE(space->params.size(), std::size_t(1));
    QCOMPARE(space->params[0].name, std::string("train.lr"));
    QVERIFY(space->params[0].log);
    auto parsed = spec::parse_experiment(panel.tomlPreview()->toPlainText().toStdString(),
                                         m_demo.toStdString());
    QVERIFY(parsed.ok());
    auto reparsed = search::parse_search_space(parsed->search.toml);
    QVERIFY(reparsed.ok());
    QCOMPARE(reparsed->params.size(), std::size_t(1));
    QCOMPARE(reparsed->params[0].high, 1e-2);
    // A bad bound: the search parser's message stands and launch is blocked.
    panel.searchEditor()->table()->item(0, ui::SearchEditor::Low)->setText("-1");
    settle(panel);
    QVERIFY(!panel.controller()->launchAllowed());
    QVERIFY(!panel.controller()->issues().value("search").isEmpty());
  }

  void templatesLoad() {
    BuilderPanel panel;
    for (const QString& name : ui::BuilderController::templateNames()) {
      QString error;
      QVERIFY2(panel.controller()->loadTemplate(name, &error), qPrintable(error));
    }
    settle(panel);
    QCOMPARE(panel.controller()->experiment().lora.enabled, false);  // full-finetune is last
    QString error;
    QVERIFY(panel.controller()->loadTemplate("qwen2-vl-2b-lora", &error));
    settle(panel);
    QCOMPARE(qobject_cast<QCheckBox*>(panel.editor("lora.enabled"))->isChecked(), true);
    QCOMPARE(qobject_cast<QLineEdit*>(panel.editor("lora.target_modules"))->text(),
             QStringLiteral("q_proj, k_proj, v_proj, o_proj"));
  }

  // New from template > demo, as a new user does it: the template validates and Launch is
  // enabled. Before, its data.train_path resolved against the working directory, where no demo
  // data was ever made ("demo-data/train.jsonl does not exist"), and Launch stayed disabled.
  void demoTemplateLaunchesAsItIs() {
    QTemporaryDir home;
    QVERIFY(home.isValid());
    const QByteArray before = qgetenv("XDG_DATA_HOME");
    qputenv("XDG_DATA_HOME", home.path().toUtf8());
    auto restore = qScopeGuard([&] { qputenv("XDG_DATA_HOME", before); });
    BuilderPanel panel;
    QString error;
    QVERIFY2(panel.controller()->loadTemplate("demo", &error), qPrintable(error));
    settle(panel);
    const auto& exp = panel.controller()->experiment();
    QVERIFY2(QFileInfo::exists(QString::fromStdString(exp.data.train_path)),
             exp.data.train_path.c_str());
    QVERIFY2(QString::fromStdString(exp.data.train_path).startsWith(home.path()),
             exp.data.train_path.c_str());
    QStringList issues;
    for (const auto& field : panel.controller()->issues().keys())
      issues << field + ": " + panel.controller()->issues().value(field).join(", ");
    QVERIFY2(issues.isEmpty(), qPrintable(issues.join("; ")));
    QVERIFY(panel.controller()->launchAllowed());
    QVERIFY(panel.launchButton()->isEnabled());
  }

  // An experiment not saved yet (New from template > demo): the command line names the file
  // Launch will save it to, and says so beside it; Launch then writes exactly that file. Before,
  // it read "shardscope-cli run <unsaved>.toml", a file that never exists.
  void unsavedCommandNamesTheFileLaunchWrites() {
    QTemporaryDir home;
    QVERIFY(home.isValid());
    const QByteArray before = qgetenv("XDG_DATA_HOME");
    qputenv("XDG_DATA_HOME", home.path().toUtf8());
    auto restore = qScopeGuard([&] { qputenv("XDG_DATA_HOME", before); });
    BuilderPanel panel;
    panel.show();
    QString error;
    QVERIFY2(panel.controller()->loadTemplate("demo", &error), qPrintable(error));
    settle(panel);
    const QString command = panel.commandPreview()->text();
    QVERIFY2(!command.contains("<unsaved>"), qPrintable(command));
    const QString prefix = "shardscope-cli run " + home.path() + "/shardscope/experiments/";
    QVERIFY2(command.startsWith(prefix) && command.endsWith(".toml"), qPrintable(command));
    QVERIFY(panel.commandNote()->isVisible());
    QVERIFY(panel.commandNote()->text().contains("not saved yet"));
    QSignalSpy launched(panel.controller(), &ui::BuilderController::launchRequested);
    panel.controller()->requestLaunch();
    QCOMPARE(launched.count(), 1);
    const QString written = launched.first().first().toString();
    QCOMPARE("shardscope-cli run " + written, command);
    QVERIFY(QFileInfo::exists(written));
    settle(panel);
    QCOMPARE(panel.commandPreview()->text(), command);  // saved there: the same file
    QVERIFY(!panel.commandNote()->isVisible());
  }

  void screenshot() {
    BuilderPanel panel;
    QString error;
    QVERIFY(panel.controller()->openFile(m_demo, &error));
    settle(panel);
    panel.resize(1600, 1000);
    panel.sections()->setCurrentIndex(3);  // [train]
    panel.show();
    QTest::qWait(50);
    const QImage image = panel.grab().toImage();
    QVERIFY(!image.isNull());
    QTemporaryDir dir;
    QVERIFY(image.save(dir.filePath("builder-panel.png")));
    // Kept in the build tree as an artifact for people to look at.
    const QString artifacts = shardscope::testing::binaryDir() + "/tests/artifacts";
    QDir().mkpath(artifacts);
    QVERIFY(image.save(artifacts + "/builder-panel.png"));
    typeInto(panel, "train.lr", "-0.1");
    settle(panel);
    QVERIFY(panel.grab().save(artifacts + "/builder-panel-invalid.png"));
  }
};

QTEST_MAIN(TestBuilderPanel)
#include "tst_builderpanel.moc"
