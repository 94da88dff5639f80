// SshSession: RAII over libssh's ssh_session, configured from one SshTarget. It only configures:
// connecting, the known-hosts check and authentication come with the SSH launcher.
#pragma once

#include <libssh/libssh.h>

#include <string>
#include <string_view>

#include "trainer/spec/result.h"

namespace shardscope::backend {

/// Where and how to reach one machine over SSH.
struct SshTarget {
  std::string host;             ///< name or address; required
  int port = 22;                ///< TCP port, 1..65535; default 22
  std::string user;             ///< login name; empty: the local user (or `user@` in host)
  std::string identityFile;     ///< private key tried first; empty: the agent and default keys
  std::string knownHostsFile;   ///< empty: ~/.ssh/known_hosts
  long connectTimeoutSec = 10;  ///< connect timeout in seconds, > 0; default 10
};

/// One configured libssh session; movable, not copyable.
class SshSession {
 public:
  /// Validates the target and applies every field with ssh_options_set; errors name the field.
  [[nodiscard]] static Result<SshSession> create(const SshTarget& target);

  SshSession(SshSession&& other) noexcept;
  SshSession& operator=(SshSession&& other) noexcept;
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;
  ~SshSession();

  // These read the options back from libssh (ssh_options_get), i.e. what it will really use.
  [[nodiscard]] Result<std::string> host() const;
  [[nodiscard]] Result<int> port() const;
  [[nodiscard]] Result<std::string> user() const;
  /// The first identity file libssh will try.
  [[nodiscard]] Result<std::string> identityFile() const;
  [[nodiscard]] Result<std::string> knownHostsFile() const;
  /// libssh cannot read the timeout back; this is the value that was set.
  long connectTimeoutSec() const { return m_connectTimeoutSec; }

  /// The raw handle, for libssh calls this class does not wrap.
  ssh_session handle() const { return m_session; }

 private:
  SshSession(ssh_session session, long connectTimeoutSec);
  Result<void> apply(const SshTarget& target);
  Result<std::string> stringOption(ssh_options_e option, const char* name) const;

  ssh_session m_session = nullptr;
  long m_connectTimeoutSec = 0;
};

/// A distinct, actionable message for each result of libssh's known-hosts check on `host`;
/// `fingerprint` ("SHA256:...") is the key the server offered, quoted in the trust command.
std::string describeKnownHostsState(ssh_known_hosts_e state, std::string_view host = "HOST",
                                    std::string_view fingerprint = "SHA256:...");

}  // namespace shardscope::backend
