#include "backend/ssh/knownhosts.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace shardscope::backend {

namespace {

std::string homeDir() {
  const char* home = std::getenv("HOME");
  return home && *home ? home : "/";
}

Result<void> makeParentDir(const std::string& file) {
  const size_t slash = file.rfind('/');
  if (slash == std::string::npos || slash == 0) return ok();
  const std::string dir = file.substr(0, slash);
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) return ok();
  if (auto parent = makeParentDir(dir); !parent) return parent;
  if (mkdir(dir.c_str(), 0700) != 0) {
    return fail(file + ": cannot create its folder " + dir + ": check permissions");
  }
  return ok();
}

std::string fingerprintOf(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t length = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) != SSH_OK) return {};
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
  ssh_clean_pubkey_hash(&hash);
  if (!text) return {};
  std::string fingerprint(text);
  ssh_string_free_char(text);
  return fingerprint;
}

Result<SshSession> connectTo(const SshTarget& target, const std::string& knownHostsPath) {
  SshTarget withFile = target;
  withFile.knownHostsFile = knownHostsPath;
  auto session = SshSession::create(withFile);
  if (!session) return session;
  if (auto connected = session->connectTransport(); !connected) return connected.error();
  return session;
}

}  // namespace

bool isSha256Fingerprint(const std::string& text) {
  const std::string prefix = "SHA256:";
  if (text.rfind(prefix, 0) != 0 || text.size() != prefix.size() + 43) return false;
  for (size_t i = prefix.size(); i < text.size(); ++i) {
    const char c = text[i];
    const bool b64 = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '+' || c == '/';
    if (!b64) return false;
  }
  return true;
}

KnownHosts::KnownHosts(std::string path) : m_path(path.empty() ? defaultPath() : std::move(path)) {}

std::string KnownHosts::defaultPath() { return homeDir() + "/.ssh/known_hosts"; }

Result<HostKeyCheck> KnownHosts::inspect(const SshTarget& target) const {
  auto session = connectTo(target, m_path);
  if (!session) return session.error();
  auto fingerprint = session->serverFingerprint();
  if (!fingerprint) return fingerprint.error();
  HostKeyCheck check;
  check.state = ssh_session_is_known_server(session->handle());
  check.fingerprint = *fingerprint;
  check.message = describeKnownHostsState(check.state, session->displayName(), *fingerprint);
  return check;
}

Result<std::string> KnownHosts::trust(const SshTarget& target,
                                      const std::string& fingerprint) const {
  if (!isSha256Fingerprint(fingerprint)) {
    return fail("fingerprint '" + fingerprint +
                "': expected SHA256: and 43 base64 characters, as `ssh-keygen -lf` prints it "
                "(MD5 fingerprints are not accepted)");
  }
  auto session = connectTo(target, m_path);
  if (!session) return session.error();
  const std::string name = session->displayName();
  auto offered = session->serverFingerprint();
  if (!offered) return offered.error();
  if (*offered != fingerprint) {
    return fail(name + ": the server offers the key " + *offered + ", not " + fingerprint +
                " that you gave. Not trusting it: check the fingerprint with the "
                "administrator; a mismatch can mean someone is intercepting the connection.");
  }
  const ssh_known_hosts_e state = ssh_session_is_known_server(session->handle());
  if (state == SSH_KNOWN_HOSTS_OK) return name + ": already trusted (" + fingerprint + ")";
  if (state == SSH_KNOWN_HOSTS_CHANGED || state == SSH_KNOWN_HOSTS_OTHER) {
    return fail(describeKnownHostsState(state, name, fingerprint) +
                " [known_hosts file: " + m_path + "]");
  }
  char* entry = nullptr;
  if (ssh_session_export_known_hosts_entry(session->handle(), &entry) != SSH_OK || !entry) {
    return fail(name + ": cannot format a known_hosts line for the server's key");
  }
  const std::string line(entry);
  ssh_string_free_char(entry);
  if (auto dir = makeParentDir(m_path); !dir) return dir.error();
  std::ofstream out(m_path, std::ios::app);
  out << line;
  if (line.empty() || line.back() != '\n') out << '\n';
  out.flush();
  if (!out) return fail(m_path + ": cannot append the host key: check the file's permissions");
  chmod(m_path.c_str(), 0600);
  return name + ": trusted " + fingerprint + " (added to " + m_path + ")";
}

Result<std::vector<KnownHostEntry>> KnownHosts::entries() const {
  std::vector<KnownHostEntry> result;
  std::ifstream in(m_path);
  if (!in) return result;
  std::string text;
  int lineNo = 0;
  while (std::getline(in, text)) {
    ++lineNo;
    std::istringstream words(text);
    KnownHostEntry entry;
    std::string base64;
    if (!(words >> entry.hosts) || entry.hosts[0] == '#') continue;
    if (entry.hosts[0] == '@') {  // @cert-authority / @revoked marker, then the host field
      if (!(words >> entry.hosts)) continue;
    }
    if (!(words >> entry.keyType >> base64)) continue;
    ssh_key key = nullptr;
    if (ssh_pki_import_pubkey_base64(base64.c_str(), ssh_key_type_from_name(entry.keyType.c_str()),
                                     &key) != SSH_OK) {
      return fail(m_path + ":" + std::to_string(lineNo) +
                  ": unreadable key; fix or delete this line (ssh-keygen -R HOST)");
    }
    entry.fingerprint = fingerprintOf(key);
    ssh_key_free(key);
    entry.line = lineNo;
    result.push_back(std::move(entry));
  }
  return result;
}

}  // namespace shardscope::backend
