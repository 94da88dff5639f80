#include "backend/ssh/sshsession.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <utility>

namespace shardscope::backend {

namespace {

std::string libsshError(ssh_session session) {
  const char* text = ssh_get_error(session);
  return text && *text ? text : "libssh gave no reason";
}

}  // namespace

SshSession::SshSession(ssh_session session, SshTarget target)
    : m_session(session),
      m_connectTimeoutSec(target.connectTimeoutSec),
      m_target(std::move(target)) {}

SshSession::SshSession(SshSession&& other) noexcept
    : m_session(std::exchange(other.m_session, nullptr)),
      m_sftp(std::exchange(other.m_sftp, nullptr)),
      m_connectTimeoutSec(other.m_connectTimeoutSec),
      m_target(std::move(other.m_target)) {}

SshSession& SshSession::operator=(SshSession&& other) noexcept {
  if (this != &other) {
    freeAll();
    m_session = std::exchange(other.m_session, nullptr);
    m_sftp = std::exchange(other.m_sftp, nullptr);
    m_connectTimeoutSec = other.m_connectTimeoutSec;
    m_target = std::move(other.m_target);
  }
  return *this;
}

SshSession::~SshSession() { freeAll(); }

void SshSession::freeAll() {
  if (m_sftp) sftp_free(std::exchange(m_sftp, nullptr));
  if (m_session) {
    if (ssh_is_connected(m_session)) ssh_disconnect(m_session);
    ssh_free(std::exchange(m_session, nullptr));
  }
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
  SshSession session(raw, target);
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
      {"proxyCommand", target.proxyCommand.c_str(), SSH_OPTIONS_PROXYCOMMAND,
       !target.proxyCommand.empty()},
  };
  // Shardscope reads ~/.ssh/config itself (SshConfig); libssh must not apply it a second time
  // to the resolved HostName at connect time.
  const int processConfig = 0;
  if (ssh_options_set(m_session, SSH_OPTIONS_PROCESS_CONFIG, &processConfig) != SSH_OK) {
    return fail("ssh target " + target.host +
                ": libssh rejected processConfig: " + libsshError(m_session));
  }
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

std::string SshSession::displayName() const {
  if (!m_target.alias.empty()) return m_target.alias;
  return m_target.port == 22 ? m_target.host : m_target.host + ":" + std::to_string(m_target.port);
}

std::string SshSession::error() const { return libsshError(m_session); }

bool SshSession::isConnected() const { return m_session && ssh_is_connected(m_session) != 0; }

void SshSession::disconnect() {
  if (m_sftp) sftp_free(std::exchange(m_sftp, nullptr));
  if (m_session && ssh_is_connected(m_session)) ssh_disconnect(m_session);
}

Result<void> SshSession::open() {
  if (auto connected = connectTransport(); !connected) return connected;
  if (auto verified = verifyHostKey(); !verified) {
    disconnect();
    return verified;
  }
  if (auto authenticated = authenticate(); !authenticated) {
    disconnect();
    return authenticated;
  }
  return ok();
}

namespace {

// TCP keepalive on the connection: a peer that vanished (a cable, a NAT's state, a host that
// froze) is noticed after about 10 + 3 x 5 s of silence, when reads start failing, instead of
// after the kernel's default two hours. A ProxyJump pipe is no TCP socket: nothing to set there.
void enableKeepalive(socket_t fd) {
  if (fd < 0) return;
  const int on = 1, idleS = 10, intervalS = 5, probes = 3;
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0) return;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idleS, sizeof idleS);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intervalS, sizeof intervalS);
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

}  // namespace

Result<void> SshSession::connectTransport() {
  if (isConnected()) return ok();
  if (ssh_connect(m_session) != SSH_OK) {
    const std::string why = error();
    // A failed ssh_connect leaves the session unusable for another attempt.
    ssh_disconnect(m_session);
    return fail(displayName() + ": cannot connect to " + m_target.host + " port " +
                std::to_string(m_target.port) + ": " + why +
                ". Check the host name, that sshd runs there and that the port is reachable.");
  }
  enableKeepalive(ssh_get_fd(m_session));
  return ok();
}

Result<std::string> SshSession::serverFingerprint() const {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(m_session, &key) != SSH_OK || !key) {
    return fail(displayName() + ": the server sent no host key: " + error());
  }
  unsigned char* hash = nullptr;
  size_t length = 0;
  const int rc = ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length);
  ssh_key_free(key);
  if (rc != SSH_OK) return fail(displayName() + ": cannot hash the server's host key");
  // "SHA256:" + unpadded base64, exactly as `ssh-keygen -lf` prints it.
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
  ssh_clean_pubkey_hash(&hash);
  if (!text) return fail(displayName() + ": cannot format the host key fingerprint");
  std::string fingerprint(text);
  ssh_string_free_char(text);
  return fingerprint;
}

Result<void> SshSession::verifyHostKey() const {
  const ssh_known_hosts_e state = ssh_session_is_known_server(m_session);
  if (state == SSH_KNOWN_HOSTS_OK) return ok();
  auto fingerprint = serverFingerprint();
  return fail(describeKnownHostsState(state, displayName(),
                                      fingerprint ? *fingerprint : std::string("SHA256:...")));
}

Result<void> SshSession::authenticate() {
  // publickey_auto tries the agent ($SSH_AUTH_SOCK) and then each identity file; a key with a
  // passphrase needs the agent, since Shardscope never prompts for or stores secrets.
  int rc = ssh_userauth_publickey_auto(m_session, nullptr, nullptr);
  if (rc == SSH_AUTH_SUCCESS) return ok();
  const std::string why = rc == SSH_AUTH_ERROR ? error() : "the server accepted none of the keys";
  std::string user = "the local user";
  if (auto name = this->user(); name) user = *name;
  return fail(displayName() + ": key authentication as " + user + " failed (" + why +
              "). Load your key into ssh-agent (ssh-add) or set IdentityFile for this host in "
              "~/.ssh/config, and check that its public key is in the server's "
              "authorized_keys. Shardscope never uses passwords.");
}

namespace {

// Appends what is available on one stream without blocking; false on a channel error.
bool drain(ssh_channel channel, int isStderr, std::string& into) {
  char buffer[16384];
  for (;;) {
    const int n = ssh_channel_read_nonblocking(channel, buffer, sizeof buffer, isStderr);
    if (n == SSH_ERROR) return false;
    if (n <= 0) return true;
    into.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

Result<ExecResult> SshSession::exec(const std::string& command, int timeoutMs) {
  if (!isConnected()) return fail(displayName() + ": not connected");
  ssh_channel channel = ssh_channel_new(m_session);
  if (!channel) return fail(displayName() + ": cannot open a channel: " + error());
  struct Closer {
    ssh_channel c;
    ~Closer() {
      ssh_channel_close(c);
      ssh_channel_free(c);
    }
  } closer{channel};
  if (ssh_channel_open_session(channel) != SSH_OK ||
      ssh_channel_request_exec(channel, command.c_str()) != SSH_OK) {
    return fail(displayName() + ": cannot run a remote command: " + error());
  }
  ExecResult result;
  int waitedMs = 0;
  while (!ssh_channel_is_eof(channel)) {
    const int ready = ssh_channel_poll_timeout(channel, 100, 0);
    if (ready == SSH_ERROR) return fail(displayName() + ": connection lost: " + error());
    if (!drain(channel, 0, result.out) || !drain(channel, 1, result.err)) {
      return fail(displayName() + ": connection lost: " + error());
    }
    if (ready == 0 || ready == SSH_EOF) waitedMs += 100;
    if (!isConnected()) return fail(displayName() + ": connection lost: " + error());
    if (waitedMs > timeoutMs) {
      return fail(displayName() + ": the remote command did not finish within " +
                  std::to_string(timeoutMs / 1000) + " s: " + command);
    }
  }
  if (!drain(channel, 0, result.out) || !drain(channel, 1, result.err)) {
    return fail(displayName() + ": connection lost: " + error());
  }
  ssh_channel_send_eof(channel);
  result.exitStatus = ssh_channel_get_exit_status(channel);
  return result;
}

Result<sftp_session> SshSession::sftp() {
  if (m_sftp) return m_sftp;
  if (!isConnected()) return fail(displayName() + ": not connected");
  sftp_session sftp = sftp_new(m_session);
  if (!sftp) return fail(displayName() + ": cannot open an SFTP channel: " + error());
  if (sftp_init(sftp) != SSH_OK) {
    sftp_free(sftp);
    return fail(displayName() + ": the server refused SFTP (is `Subsystem sftp` configured in " +
                "its sshd_config?): " + error());
  }
  m_sftp = sftp;
  return m_sftp;
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
