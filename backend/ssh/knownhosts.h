// KnownHosts: the user's known_hosts file as Shardscope uses it. A host whose key is not there is
// refused until the user trusts it by the fingerprint `ssh-keygen -lf` prints ("SHA256:..."),
// which they check out of band (`shardscope-cli hosts trust HOST SHA256:...`, later a dialog); a
// key that differs from the trusted one is a hard failure with the attack warning.
#pragma once

#include <libssh/libssh.h>

#include <string>
#include <vector>

#include "backend/ssh/sshsession.h"
#include "spec/result.h"

namespace shardscope::backend {

/// One key line of a known_hosts file.
struct KnownHostEntry {
  std::string hosts;        ///< host field as written ("[127.0.0.1]:2222", "gpu1,10.0.0.5")
  std::string keyType;      ///< "ssh-ed25519", "ecdsa-sha2-nistp256", ...
  std::string fingerprint;  ///< "SHA256:..." as ssh-keygen -lf prints it
  int line = 0;             ///< 1-based line number in the file
};

/// What a server offers and how it compares with the known_hosts file.
struct HostKeyCheck {
  ssh_known_hosts_e state = SSH_KNOWN_HOSTS_ERROR;
  std::string fingerprint;  ///< the key the server offered
  std::string message;      ///< describeKnownHostsState() for that state
};

class KnownHosts {
 public:
  /// `path` empty: ~/.ssh/known_hosts (what OpenSSH uses too).
  explicit KnownHosts(std::string path = {});
  static std::string defaultPath();
  const std::string& path() const { return m_path; }

  /// Connects to `target` (no login) and compares its key with this file.
  [[nodiscard]] Result<HostKeyCheck> inspect(const SshTarget& target) const;
  /// Adds the key `target` offers, if and only if its fingerprint equals `fingerprint`. A host
  /// whose trusted key changed is refused: the old entry must be removed by hand first.
  /// Returns a one-line confirmation.
  [[nodiscard]] Result<std::string> trust(const SshTarget& target,
                                          const std::string& fingerprint) const;
  /// Every key line of the file (a missing file has none).
  [[nodiscard]] Result<std::vector<KnownHostEntry>> entries() const;

 private:
  std::string m_path;
};

/// True when `text` looks like an OpenSSH SHA256 fingerprint ("SHA256:" + 43 base64 chars).
bool isSha256Fingerprint(const std::string& text);

}  // namespace shardscope::backend
