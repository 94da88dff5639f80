// shardscope: the dashboard. main() only wires the application to the main window.
#include <QApplication>
#include <QIcon>

#include <cstdio>
#include <cstring>

#include "trainer/spec/version.h"
#include "ui/mainwindow.h"

int main(int argc, char** argv) {
  // Answered before QApplication exists, so they work on a machine without a display.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0) {
      std::printf("shardscope %s\n", shardscope::kVersion);
      return 0;
    }
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "Usage: shardscope [--version] [Qt options such as -platform NAME]\n"
          "The dashboard for sharded fine-tuning runs; shardscope-cli is its headless "
          "twin.\n");
      return 0;
    }
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Shardscope"));
  QApplication::setApplicationVersion(QString::fromLatin1(shardscope::kVersion));
  QApplication::setOrganizationName(QStringLiteral("Shardscope"));
  QApplication::setDesktopFileName(QStringLiteral("shardscope"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/shardscope/shardscope.svg")));

  shardscope::ui::MainWindow window;
  window.show();
  return QApplication::exec();
}
