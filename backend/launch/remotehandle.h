// RemoteRunHandle: what the SSH and Slurm handles share. A run placed by a RunLocation, one
// RankState per rank, and each rank's files read by name (rankFileName) through the handle's
// own transport (an SFTP session per node, or the Slurm host's).
#pragma once

#include <QString>

#include <utility>

#include "backend/launch/launcher.h"
#include "backend/launch/rankfiles.h"

namespace shardscope::backend {

class RemoteRunHandle : public RunHandle {
 public:
  RunLocation location() const override { return m_location; }
  QList<RankState> ranks() const override { return m_ranks; }
  Result<QByteArray> readEvents(int rank, qint64 offset, qint64 maxBytes) override {
    return readFile(rank, rankFileName(rank, RankFile::events), offset, maxBytes);
  }
  Result<QByteArray> readLog(int rank, qint64 offset, qint64 maxBytes) override {
    return readFile(rank, rankFileName(rank, RankFile::log), offset, maxBytes);
  }

 protected:
  RemoteRunHandle(RunLocation location, QObject* parent)
      : RunHandle(parent), m_location(std::move(location)) {}

  /// Up to maxBytes of the file `name` of rank `rank` from byte `offset`.
  virtual Result<QByteArray> readFile(int rank, const QString& name, qint64 offset,
                                      qint64 maxBytes) = 0;

  RunLocation m_location;
  QList<RankState> m_ranks;  // filled by the handle's constructor, one per rank
};

}  // namespace shardscope::backend
