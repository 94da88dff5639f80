#include "backend/ssh/sshsession.h"

#include <utility>

namespace shardscope::backend {

namespace {

std::string libsshError(ssh_session session) {
  const char* text = ssh_get_error(session);
  return text && *text ? text : "libssh gave no reason";
}

}  // namespace

SshSession::SshSession(ssh_session session, long connectTimeoutSec)
    : m_session(session), m_connectTimeoutSec(connectTimeoutSec) {}

SshSession::SshSession(SshSession&& other) noexcept
    : m_session(std::exchange(other.m_session, nullptr)),
      m_connectTimeoutSec(other.m_connectTimeoutSec) {}

SshSession& SshSession::operator=(SshSession&& other) noexcept {
  if (this != &other) {
    if (m_session) ssh_free(m_session);
    m_session = std::exchange(other.m_session, nullptr);
    m_connectTimeoutSec = other.m_connectTimeoutSec;
  }
  return *this;
}

SshSession::~SshSession() {
  if (m_session) ssh_free(m_session);
}

Result<SshSession> SshSession::create(const SshTarget& target) {
  // libssh would take some of these and misbehave later: it keeps only the low 16 bits of a
  // port, so 65558 would silently become 22.
  if (target.host.empty()) {
    return fail("ssh target: host is empty: give the machine's name or address");
  }
  if (target.port < 1 || target.port > 65535) {
    return fail("ssh target " + target.host + ": port " + std::to_string(target.port) +
                " is out of range: use 1..65535 (22 is the SSH default)");
  }
  if (target.connectTimeoutSec <= 0) {
    return fail("ssh target " + target.host + ": connectTimeoutSec " +
                std::to_string(target.connectTimeoutSec) + " must be > 0 seconds (default 10)");
  }
  ssh_session raw = ssh_new();
  if (!raw) return fail("ssh target " + target.host + ": libssh could not allocate a session");
  SshSession session(raw, target.connectTimeoutSec);
  if (auto applied = session.apply(target); !applied) return applied.error();
  return session;
}

Result<void> SshSession::apply(const SshTarget& target) {
  const int port = target.port;  // libssh reads SSH_OPTIONS_PORT through an int*
  const long timeout = target.connectTimeoutSec;
  struct Option {
    const char* name;
    const void* value;
    ssh_options_e option;
    bool given;
  };
  // Host first: "user@host" sets the user, and an explicit user must win over it.
  const Option options[] = {
      {"host", target.host.c_str(), SSH_OPTIONS_HOST, true},
      {"port", &port, SSH_OPTIONS_PORT, true},
      {"user", target.user.c_str(), SSH_OPTIONS_USER, !target.user.empty()},
      {"knownHostsFile", target.knownHostsFile.c_str(), SSH_OPTIONS_KNOWNHOSTS,
       !target.knownHostsFile.empty()},
      {"connectTimeoutSec", &timeout, SSH_OPTIONS_TIMEOUT, true},
      // libssh 0.10 puts an added identity at the front, ahead of the default ~/.ssh/id_*.
      {"identityFile", target.identityFile.c_str(), SSH_OPTIONS_ADD_IDENTITY,
       !target.identityFile.empty()},
  };
  for (const Option& option : options) {
    if (!option.given) continue;
    if (ssh_options_set(m_session, option.option, option.value) != SSH_OK) {
      return fail("ssh target " + target.host + ": libssh rejected " + option.name + ": " +
                  libsshError(m_session));
    }
  }
  return ok();
}

Result<std::string> SshSession::stringOption(ssh_options_e option, const char* name) const {
  char* value = nullptr;
  if (ssh_options_get(m_session, option, &value) != SSH_OK || !value) {
    return fail(std::string("ssh session: option ") + name + " is not set");
  }
  std::string text(value);
  ssh_string_free_char(value);
  return text;
}

Result<std::string> SshSession::host() const { return stringOption(SSH_OPTIONS_HOST, "host"); }

Result<int> SshSession::port() const {
  unsigned int port = 0;
  if (ssh_options_get_port(m_session, &port) != SSH_OK) {
    return fail("ssh session: option port is not set");
  }
  return static_cast<int>(port);
}

Result<std::string> SshSession::user() const { return stringOption(SSH_OPTIONS_USER, "user"); }

Result<std::string> SshSession::identityFile() const {
  return stringOption(SSH_OPTIONS_IDENTITY, "identityFile");
}

Result<std::string> SshSession::knownHostsFile() const {
  return stringOption(SSH_OPTIONS_KNOWNHOSTS, "knownHostsFile");
}

std::string describeKnownHostsState(ssh_known_hosts_e state, std::string_view host,
                                    std::string_view fingerprint) {
  const std::string h(host);
  const std::string trust = "shardscope-cli hosts trust " + h + " " + std::string(fingerprint);
  switch (state) {
    case SSH_KNOWN_HOSTS_OK:
      return h + ": host key verified against known_hosts.";
    case SSH_KNOWN_HOSTS_CHANGED:
      return h +
             ": WARNING: the host key has CHANGED since it was trusted. Someone may be "
             "intercepting the connection (man-in-the-middle attack), or the administrator "
             "replaced the key. Not connecting. Ask the administrator for the new key's "
             "fingerprint; only if it matches " +
             std::string(fingerprint) + ", remove the old entry (ssh-keygen -R " + h +
             ") and run: " + trust;
    case SSH_KNOWN_HOSTS_OTHER:
      return h +
             ": WARNING: the server offered a key of a different type than the one in "
             "known_hosts; this can be an attack. Not connecting. Confirm with the "
             "administrator that the server's keys changed, then run: " +
             trust;
    case SSH_KNOWN_HOSTS_UNKNOWN:
      return h + ": this host is not in known_hosts yet. Check its fingerprint " +
             std::string(fingerprint) + " with the administrator (ssh-keyscan " + h +
             " | ssh-keygen -lf -), then accept it with: " + trust;
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      return h +
             ": there is no known_hosts file yet, so no host is trusted. Check the "
             "fingerprint " +
             std::string(fingerprint) + " with the administrator, then run: " + trust +
             " (it creates the file).";
    case SSH_KNOWN_HOSTS_ERROR:
      return h +
             ": the known-hosts check itself failed (unreadable known_hosts file, or the "
             "server sent no usable key). Check that ~/.ssh/known_hosts is readable and "
             "that the server runs sshd, then retry.";
  }
  // Not a value libssh 0.10 defines: a newer libssh added one and this switch needs it.
  return h + ": unexpected known-hosts result " + std::to_string(static_cast<int>(state)) +
         " from libssh; not connecting. Please report this with your libssh version.";
}

}  // namespace shardscope::backend
