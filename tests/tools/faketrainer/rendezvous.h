// faketrainer's rendezvous: where this rank is (torchrun's variables, else Slurm's, read by
// trainer/dist/rendezvous.cpp as shardtrain reads them) and a real TCP meeting with its peers, so a
// wrong MASTER_PORT, a wrong WORLD_SIZE or a duplicate RANK fails the way it fails for shardtrain.
// Rank 0 binds MASTER_ADDR:MASTER_PORT (MASTER_PORT=0: a free port, published through
// SHARDSCOPE_RDZV_FILE by write-then-rename) and keeps the listener for the whole run; the others
// connect and say "rank R world W".
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include "spec/result.h"
#include "spec/status.h"
#include "trainer/dist/rendezvous.h"

namespace faketrainer {

/// Where this rank is: trainer/dist's reading of torchrun's variables, else Slurm's, else a single
/// process (shardscope::dist::rendezvous_from_env), the same code and messages as shardtrain's.
using RankEnv = shardscope::dist::Rendezvous;

/// The connections of one rank to its peers (rank 0: one per peer; others: one to rank 0).
class Group {
 public:
  Group() = default;
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  /// Meets every rank, up to `timeout_s`; `stop` set by SIGTERM aborts the wait.
  shardscope::Result<void> join(const RankEnv& env, int timeout_s,
                                const volatile std::sig_atomic_t& stop);
  /// Rank 0: the port it listens on.
  int port() const { return m_port; }
  /// Without blocking: an error naming the peer when one has closed its connection.
  shardscope::Result<void> check_peers() const;
  /// End-of-run barrier: every rank reaches it or the peer that left is named.
  shardscope::Result<void> barrier(const volatile std::sig_atomic_t& stop);
  /// The error kind of the last failure (config for a mismatch, peer_lost otherwise).
  shardscope::spec::ErrorKind last_kind() const { return m_kind; }

 private:
  shardscope::Result<void> join_as_root(const RankEnv& env, long deadline_ms,
                                        const volatile std::sig_atomic_t& stop);
  shardscope::Result<void> join_as_peer(const RankEnv& env, long deadline_ms,
                                        const volatile std::sig_atomic_t& stop);
  shardscope::Result<void> accept_peer(const RankEnv& env, long deadline_ms,
                                       const volatile std::sig_atomic_t& stop,
                                       std::vector<int>& seen);
  shardscope::Error failure(shardscope::spec::ErrorKind kind, const std::string& message);

  int m_rank = 0;
  int m_listen = -1;
  int m_port = 0;
  std::vector<int> m_fds;  // rank 0: index = peer rank (-1 for itself); others: [0] = root
  shardscope::spec::ErrorKind m_kind = shardscope::spec::ErrorKind::internal;
};

}  // namespace faketrainer
