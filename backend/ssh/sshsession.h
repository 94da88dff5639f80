// SshSession: RAII over libssh's ssh_session, configured from one SshTarget: connect, the
// known-hosts check (an unknown or changed key refuses to connect), key authentication (agent,
// then identity files; never a password), remote commands, and an SFTP channel (sftp.h).
// libssh sessions are not thread-safe: use a session from one thread at a time.
#pragma once

#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include <string>
#include <string_view>

#include "spec/result.h"

namespace shardscope::backend {

/// Where and how to reach one machine over SSH.
struct SshTarget {
  std::string host;             ///< name or address; required
  int port = 22;                ///< TCP port, 1..65535; default 22
  std::string user;             ///< login name; empty: the local user (or `user@` in host)
  std::string identityFile;     ///< private key tried first; empty: the agent and default keys
  std::string knownHostsFile;   ///< empty: ~/.ssh/known_hosts
  long connectTimeoutSec = 10;  ///< connect timeout in seconds, > 0; default 10
  std::string proxyCommand;     ///< command whose stdin/stdout reach the server (ProxyJump)
  std::string alias;            ///< the name the user knows the host by; in messages
};

/// What a remote command did.
struct ExecResult {
  int exitStatus = -1;  ///< the command's exit status (-1 when the server did not say)
  std::string out;      ///< its stdout
  std::string err;      ///< its stderr
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
  /// The target this session was created from.
  const SshTarget& target() const { return m_target; }
  /// The alias (or host) for messages.
  std::string displayName() const;

  /// Connects, verifies the host key (verifyHostKey) and authenticates (authenticate).
  [[nodiscard]] Result<void> open();
  /// TCP + SSH handshake only; the host key is not checked yet (see verifyHostKey).
  [[nodiscard]] Result<void> connectTransport();
  /// The server's host key fingerprint as `ssh-keygen -lf` prints it ("SHA256:base64").
  [[nodiscard]] Result<std::string> serverFingerprint() const;
  /// Checks the server's key against the known_hosts file; every failure has its own message.
  [[nodiscard]] Result<void> verifyHostKey() const;
  /// Public-key authentication: ssh-agent first, then the identity files. Never a password.
  [[nodiscard]] Result<void> authenticate();
  /// True while the SSH connection is up (as far as libssh knows).
  bool isConnected() const;
  /// Closes SFTP and the connection; the session can be opened again.
  void disconnect();

  /// Runs `command` through the remote user's shell; waits at most timeoutMs for it to finish.
  [[nodiscard]] Result<ExecResult> exec(const std::string& command, int timeoutMs = 30000);
  /// The session's SFTP channel, opened on first use.
  [[nodiscard]] Result<sftp_session> sftp();

 private:
  SshSession(ssh_session session, SshTarget target);
  Result<void> apply(const SshTarget& target);
  Result<std::string> stringOption(ssh_options_e option, const char* name) const;
  std::string error() const;
  void freeAll();

  ssh_session m_session = nullptr;
  sftp_session m_sftp = nullptr;
  long m_connectTimeoutSec = 0;
  SshTarget m_target;
};

/// A distinct, actionable message for each result of libssh's known-hosts check on `host`;
/// `fingerprint` ("SHA256:...") is the key the server offered, quoted in the trust command.
std::string describeKnownHostsState(ssh_known_hosts_e state, std::string_view host = "HOST",
                                    std::string_view fingerprint = "SHA256:...");

}  // namespace shardscope::backend
