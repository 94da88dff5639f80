// backend/export/tfevents: CRC-32C and TFRecord framing against their published check values,
// and Event encodings byte for byte against what tensorboard.compat.proto's classes serialise
// for the same fields (event_pb2.Event(...).SerializeToString().hex(), tensorboard 2.21).
#include <QTemporaryDir>
#include <QTest>

#include "backend/export/tfevents.h"

namespace tf = shardscope::backend::tfevents;

class TestTfEvents : public QObject {
  Q_OBJECT

 private slots:
  void crc32cMatchesItsCheckValue() {
    QCOMPARE(tf::crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value (RFC 3720)
    QCOMPARE(tf::crc32c(QByteArray()), 0u);
    QCOMPARE(tf::maskedCrc(0xE3069283u), 0xc78ab0e5u);
  }

  void frameHoldsLengthPayloadAndTheirMaskedCrcs() {
    const QByteArray payload("event bytes");
    const QByteArray record = tf::frame(payload);
    QCOMPARE(record.size(), 8 + 4 + payload.size() + 4);
    const QByteArray length = record.left(8);
    QCOMPARE(length, QByteArray::fromHex("0b00000000000000"));  // 11, little-endian
    const auto crcAt = [&](qsizetype at) {
      quint32 v = 0;
      for (int i = 3; i >= 0; --i) v = (v << 8) | quint8(record[at + i]);
      return v;
    };
    QCOMPARE(crcAt(8), tf::maskedCrc(tf::crc32c(length)));
    QCOMPARE(record.mid(12, payload.size()), payload);
    QCOMPARE(crcAt(12 + payload.size()), tf::maskedCrc(tf::crc32c(payload)));
  }

  void eventsEncodeAsTensorBoardsProtobufDoes() {
    // Event(wall_time=1700000000.25, step=300, summary=Summary(value=[Value(tag="mem/peak",
    // simple_value=1.5)]))
    QCOMPARE(tf::scalarEvent(1700000000.25, 300, "mem/peak", 1.5).toHex(),
             QByteArray("0900001040fc54d94110ac022a110a0f0a086d656d2f7065616b150000c03f"));
    // Event(wall_time=1700000000.25, file_version="brain.Event:2")
    QCOMPARE(tf::versionEvent(1700000000.25).toHex(),
             QByteArray("0900001040fc54d9411a0d627261696e2e4576656e743a32"));
  }

  void sessionEndCarriesThePluginData() {
    // HParamsPluginData(session_end_info=SessionEndInfo(status=STATUS_FAILURE,
    // end_time_secs=2.5)) is the content of the summary's plugin data.
    const QByteArray event = tf::sessionEndEvent(2.5, tf::SessionStatus::failure, 2.5);
    QVERIFY(event.contains(QByteArray::fromHex("220b0802110000000000000440")));
    QVERIFY(event.contains("_hparams_/session_end_info"));
    QVERIFY(event.contains("hparams"));
  }

  void writerNamesTheFileAsTensorBoardLooksForIt() {
    QTemporaryDir dir;
    auto writer = tf::EventFileWriter::create(dir.filePath("a/b"), 1700000000.5);
    QVERIFY2(writer.ok(), writer.ok() ? "" : writer.message().c_str());
    QVERIFY((*writer)->path().contains("/a/b/events.out.tfevents.1700000000."));
    QVERIFY((*writer)->write(tf::scalarEvent(1.0, 1, "loss", 2.0)).ok());
    QVERIFY((*writer)->close().ok());
    QFile file((*writer)->path());
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray bytes = file.readAll();
    const QByteArray first = tf::frame(tf::versionEvent(1700000000.5));
    QCOMPARE(bytes.left(first.size()), first);
    QCOMPARE(bytes.mid(first.size()), tf::frame(tf::scalarEvent(1.0, 1, "loss", 2.0)));
  }
};

QTEST_GUILESS_MAIN(TestTfEvents)
#include "tst_tfevents.moc"
