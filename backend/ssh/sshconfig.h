// SshConfig: the subset of OpenSSH's ~/.ssh/config that Shardscope acts on, so a host alias means
// the same machine in Shardscope as in `ssh ALIAS`. Keywords: Host (patterns with * and ?,
// negation with !), HostName, User, Port, IdentityFile, ProxyJump. As in OpenSSH, the first value
// obtained for a keyword wins, and `Host *` blocks usually come last. Other keywords are ignored;
// a `Match` block never matches (Shardscope does not evaluate Match criteria).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backend/ssh/sshsession.h"
#include "spec/result.h"

namespace shardscope::backend {

/// What ~/.ssh/config says about one alias, after defaults and %-token expansion.
struct SshHostConfig {
  std::string alias;                       ///< the name the user typed
  std::string hostName;                    ///< HostName, or the alias itself
  std::string user;                        ///< User; empty: the local user
  int port = 22;                           ///< Port; default 22
  std::vector<std::string> identityFiles;  ///< IdentityFile entries, ~ and %d/%h/%u/%r expanded
  std::string proxyJump;                   ///< ProxyJump as written ([user@]host[:port][,...])
};

/// A parsed ssh config file; cheap to copy.
class SshConfig {
 public:
  /// Reads `path` (empty: ~/.ssh/config). A missing file is an empty config, not an error.
  [[nodiscard]] static Result<SshConfig> load(const std::string& path = {});
  /// Parses config text; `sourceName` appears in messages ("config:12: Port: ...").
  [[nodiscard]] static Result<SshConfig> parse(std::string_view text,
                                               const std::string& sourceName);
  /// ~/.ssh/config of the current user.
  static std::string defaultPath();

  /// The settings for `alias` (a name, or user@name, which then wins over User).
  SshHostConfig resolve(const std::string& alias) const;
  /// An SshTarget for `alias`: HostName, User, Port, the first IdentityFile, and ProxyJump as a
  /// ProxyCommand running OpenSSH's `ssh -W` with this same config file and `knownHostsFile`.
  SshTarget target(const std::string& alias, const std::string& knownHostsFile = {}) const;
  /// The file this config came from (empty when parsed from text).
  const std::string& path() const { return m_path; }
  /// Every non-pattern alias named in a Host line, in file order (for `hosts ls`).
  std::vector<std::string> aliases() const;

 private:
  struct Option {
    std::string key;  // lower case
    std::string value;
  };
  struct Block {
    std::vector<std::string> patterns;  // empty: the options before the first Host line
    bool isMatch = false;
    std::vector<Option> options;
  };
  std::vector<Block> m_blocks;
  std::string m_path;
};

/// OpenSSH's pattern rules: `*` any run, `?` one character; a pattern list matches when some
/// pattern matches and no negated (`!`) pattern does.
bool sshHostMatches(const std::vector<std::string>& patterns, std::string_view host);

}  // namespace shardscope::backend
