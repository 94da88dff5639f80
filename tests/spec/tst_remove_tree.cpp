#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "spec/remove_tree.h"

using namespace shardscope::spec;

// shardtrain's recursive removal (checkpoint pruning, the selftest's folder): nftw, not
// std::filesystem::remove_all, whose copy in PyTorch's libtorch.so crashed on the GPU machine.
class TestRemoveTree : public QObject {
  Q_OBJECT

 private slots:
  void removesNestedFoldersButNotWhatLinksPointTo() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const QString root = tmp.filePath("ckpt/step-000010");
    QVERIFY(QDir().mkpath(root + "/a/b"));
    for (const QString& f :
         {root + "/meta.json", root + "/a/rank-0.safetensors", root + "/a/b/x"}) {
      QFile file(f);
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write("data");
    }
    const QString outside = tmp.filePath("keep.txt");
    QFile keep(outside);
    QVERIFY(keep.open(QIODevice::WriteOnly));
    keep.close();
    QVERIFY(QFile::link(outside, root + "/a/link"));
    QVERIFY(QFile::link(tmp.path(), root + "/dirlink"));  // a link to a folder is not followed
    std::string error;
    QVERIFY2(remove_tree(root.toStdString(), &error), error.c_str());
    QVERIFY(!QFileInfo::exists(root));
    QVERIFY(QFileInfo::exists(tmp.filePath("ckpt")));
    QVERIFY(QFileInfo::exists(outside));
  }

  void missingPathIsNotAnError() {
    QTemporaryDir tmp;
    std::string error;
    QVERIFY(remove_tree(tmp.filePath("nothing/here").toStdString(), &error));
    QVERIFY(error.empty());
  }

  void plainFileIsRemoved() {
    QTemporaryDir tmp;
    QFile file(tmp.filePath("port"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.close();
    QVERIFY(remove_tree(file.fileName().toStdString()));
    QVERIFY(!QFileInfo::exists(file.fileName()));
  }
};

QTEST_APPLESS_MAIN(TestRemoveTree)
#include "tst_remove_tree.moc"
