#include "backend/ssh/sshconfig.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "backend/ssh/shellquote.h"

namespace shardscope::backend {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string homeDir() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "/";
}

std::string localUser() {
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_name) return pw->pw_name;
  if (const char* user = std::getenv("USER"); user && *user) return user;
  return "root";
}

// Splits a config line into words: whitespace separates, "double quotes" group, and the first
// word may end in '=' or be joined to its value by '=' (OpenSSH accepts `Port=22`).
std::vector<std::string> splitWords(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false;
  bool inWord = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      inWord = true;
    } else if (!quoted &&
               (std::isspace(static_cast<unsigned char>(c)) || (c == '=' && words.empty()))) {
      if (inWord) words.push_back(std::exchange(word, {}));
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push_back(word);
  return words;
}

bool globMatches(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, starP = std::string_view::npos, starT = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      starP = p++;
      starT = t;
    } else if (starP != std::string_view::npos) {
      p = starP + 1;
      t = ++starT;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// OpenSSH's %-tokens in HostName and IdentityFile, and ~ at the start of a path.
std::string expandTokens(const std::string& value, const SshHostConfig& host) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%' || i + 1 == value.size()) {
      out += value[i];
      continue;
    }
    const char token = value[++i];
    switch (token) {
      case '%':
        out += '%';
        break;
      case 'h':
        out += host.hostName;
        break;
      case 'n':
        out += host.alias;
        break;
      case 'd':
        out += homeDir();
        break;
      case 'u':
        out += localUser();
        break;
      case 'r':
        out += host.user.empty() ? localUser() : host.user;
        break;
      case 'p':
        out += std::to_string(host.port);
        break;
      default:
        out += '%';
        out += token;
        break;
    }
  }
  if (out == "~") return homeDir();
  if (out.rfind("~/", 0) == 0) return homeDir() + out.substr(1);
  return out;
}

}  // namespace

bool sshHostMatches(const std::vector<std::string>& patterns, std::string_view host) {
  bool matched = false;
  for (const std::string& pattern : patterns) {
    if (!pattern.empty() && pattern[0] == '!') {
      if (globMatches(std::string_view(pattern).substr(1), host)) return false;
    } else if (globMatches(pattern, host)) {
      matched = true;
    }
  }
  return matched;
}

std::string SshConfig::defaultPath() { return homeDir() + "/.ssh/config"; }

Result<SshConfig> SshConfig::load(const std::string& path) {
  const std::string file = path.empty() ? defaultPath() : path;
  std::ifstream in(file);
  if (!in) {
    if (access(file.c_str(), F_OK) != 0) {
      SshConfig empty;
      empty.m_path = file;
      return empty;
    }
    return fail(file + ": cannot read the ssh config file: check its permissions");
  }
  std::stringstream text;
  text << in.rdbuf();
  auto config = parse(text.str(), file);
  if (config) config->m_path = file;
  return config;
}

Result<SshConfig> SshConfig::parse(std::string_view text, const std::string& sourceName) {
  SshConfig config;
  config.m_blocks.push_back(Block{});
  std::istringstream lines{std::string(text)};
  std::string line;
  int lineNo = 0;
  while (std::getline(lines, line)) {
    ++lineNo;
    const std::string where = sourceName + ":" + std::to_string(lineNo) + ": ";
    std::vector<std::string> words = splitWords(line);
    if (words.empty() || words[0][0] == '#') continue;
    const std::string key = lower(words[0]);
    if (words.size() < 2) {
      return fail(where + words[0] + ": needs a value (e.g. `" + words[0] + " VALUE`)");
    }
    if (key == "host" || key == "match") {
      Block block;
      block.isMatch = key == "match";
      for (size_t i = 1; i < words.size(); ++i) block.patterns.push_back(words[i]);
      config.m_blocks.push_back(std::move(block));
      continue;
    }
    if (key == "port") {
      char* end = nullptr;
      const long port = std::strtol(words[1].c_str(), &end, 10);
      if (*end != '\0' || port < 1 || port > 65535) {
        return fail(where + "Port: '" + words[1] + "' is not a port number: use 1..65535");
      }
    }
    config.m_blocks.back().options.push_back(Option{key, words[1]});
  }
  return config;
}

SshHostConfig SshConfig::resolve(const std::string& alias) const {
  SshHostConfig host;
  std::string name = alias;
  std::string userFromAlias;
  if (const size_t at = alias.rfind('@'); at != std::string::npos) {
    userFromAlias = alias.substr(0, at);
    name = alias.substr(at + 1);
  }
  host.alias = name;
  bool haveHostName = false, haveUser = false, havePort = false, haveJump = false;
  std::string rawHostName;
  std::vector<std::string> rawIdentities;
  for (const Block& block : m_blocks) {
    const bool applies =
        block.patterns.empty() || (!block.isMatch && sshHostMatches(block.patterns, name));
    if (!applies) continue;
    for (const Option& option : block.options) {
      if (option.key == "hostname" && !haveHostName) {
        rawHostName = option.value;
        haveHostName = true;
      } else if (option.key == "user" && !haveUser) {
        host.user = option.value;
        haveUser = true;
      } else if (option.key == "port" && !havePort) {
        host.port = std::atoi(option.value.c_str());
        havePort = true;
      } else if (option.key == "identityfile") {
        rawIdentities.push_back(option.value);  // OpenSSH accumulates these
      } else if (option.key == "proxyjump" && !haveJump) {
        host.proxyJump = lower(option.value) == "none" ? "" : option.value;
        haveJump = true;
      }
    }
  }
  if (!userFromAlias.empty()) host.user = userFromAlias;
  host.hostName = name;
  if (haveHostName) host.hostName = expandTokens(rawHostName, host);
  for (const std::string& identity : rawIdentities) {
    host.identityFiles.push_back(expandTokens(identity, host));
  }
  return host;
}

SshTarget SshConfig::target(const std::string& alias, const std::string& knownHostsFile) const {
  const SshHostConfig host = resolve(alias);
  SshTarget target;
  target.host = host.hostName;
  target.port = host.port;
  target.user = host.user;
  if (!host.identityFiles.empty()) target.identityFile = host.identityFiles.front();
  target.knownHostsFile = knownHostsFile;
  target.alias = alias;
  if (!host.proxyJump.empty()) {
    // OpenSSH's client does the jump (it reads this same config for the jump host); libssh
    // talks to the target through its stdin/stdout. BatchMode: never a password prompt.
    std::string command = "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes";
    if (!m_path.empty()) command += " -F " + shellQuote(m_path);
    if (!knownHostsFile.empty()) command += " -o UserKnownHostsFile=" + shellQuote(knownHostsFile);
    const std::string destination =
        host.hostName.find(':') != std::string::npos ? "[" + host.hostName + "]" : host.hostName;
    // "a,b,c": OpenSSH jumps through a and b (-J) and forwards from c (-W).
    std::string last = host.proxyJump;
    if (const size_t comma = last.rfind(','); comma != std::string::npos) {
      command += " -J " + shellQuote(last.substr(0, comma));
      last = last.substr(comma + 1);
    }
    command +=
        " -W " + shellQuote(destination + ":" + std::to_string(host.port)) + " " + shellQuote(last);
    target.proxyCommand = command;
  }
  return target;
}

std::vector<std::string> SshConfig::aliases() const {
  std::vector<std::string> names;
  for (const Block& block : m_blocks) {
    if (block.isMatch) continue;
    for (const std::string& pattern : block.patterns) {
      const bool isPattern = pattern.find_first_of("*?!") != std::string::npos;
      if (!isPattern && std::find(names.begin(), names.end(), pattern) == names.end()) {
        names.push_back(pattern);
      }
    }
  }
  return names;
}

}  // namespace shardscope::backend
