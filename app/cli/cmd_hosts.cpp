// `hosts add|ls|check|trust`: SSH hosts for launch.kind = "ssh". Hosts are ~/.ssh/config aliases
// (or names); `check` connects without logging in and compares the host key with known_hosts;
// `trust HOST SHA256:...` adds the key the host offers only when its fingerprint is the one the
// user checked out of band (as `ssh-keygen -lf` prints it).
#include <QJsonArray>

#include <iostream>

#include "app/cli/cli_common.h"
#include "backend/ssh/knownhosts.h"
#include "backend/ssh/sshconfig.h"

namespace shardscope::cli {
namespace {

struct HostArgs {
  std::string alias;
  std::string fingerprint;
  std::string sshConfig;   // --ssh-config; empty: ~/.ssh/config
  std::string knownHosts;  // --known-hosts; empty: ~/.ssh/known_hosts
};

backend::SshConfig loadConfig(const HostArgs& a) {
  return orExit(backend::SshConfig::load(a.sshConfig));
}

void addHost(const Globals& g, const HostArgs& a) {
  const auto cfg = loadConfig(a).resolve(a.alias);
  auto store = openStore(g);
  backend::HostRecord host{QString::fromStdString(a.alias),
                           QString::fromStdString(cfg.hostName),
                           cfg.port,
                           QString::fromStdString(cfg.user),
                           {},
                           std::nullopt};
  orExit(store->saveHost(host).get());
  std::cout << "added " << a.alias << " (" << cfg.hostName << ":" << cfg.port
            << "); check its key with `shardscope-cli hosts check " << a.alias << "`\n";
}

void listHosts(const Globals& g) {
  auto reader = openReader(g);
  const auto hosts = orExit(reader.hosts());
  if (g.json) {
    QJsonArray array;
    for (const auto& h : hosts) {
      array.append(QJsonObject{
          {"alias", h.alias},
          {"hostname", h.hostname},
          {"port", h.port},
          {"user", h.user},
          {"fingerprint", h.fingerprint.isEmpty() ? QJsonValue() : QJsonValue(h.fingerprint)}});
    }
    printJson({{"hosts", array}});
    return;
  }
  for (const auto& h : hosts) {
    std::cout << h.alias.toStdString() << "  " << h.hostname.toStdString() << ':' << h.port << "  "
              << (h.fingerprint.isEmpty() ? "not trusted" : h.fingerprint.toStdString()) << '\n';
  }
}

void checkHost(const Globals& g, const HostArgs& a) {
  const backend::KnownHosts known(a.knownHosts);
  const auto target = loadConfig(a).target(a.alias, known.path());
  const auto check = orExit(known.inspect(target));
  if (g.json) {
    printJson({{"alias", QString::fromStdString(a.alias)},
               {"known", check.state == SSH_KNOWN_HOSTS_OK},
               {"fingerprint", QString::fromStdString(check.fingerprint)},
               {"message", QString::fromStdString(check.message)}});
  } else {
    std::cout << a.alias << ": " << check.fingerprint << '\n' << check.message << '\n';
  }
  if (check.state != SSH_KNOWN_HOSTS_OK) throw VerbExit{kExitError};
}

void trustHost(const Globals& g, const HostArgs& a) {
  if (!backend::isSha256Fingerprint(a.fingerprint)) {
    exitWith(kExitUsage,
             "FINGERPRINT: expected SHA256:<43 base64 characters> as `ssh-keygen -lf` "
             "prints it, got \"" +
                 a.fingerprint + "\"");
  }
  const backend::KnownHosts known(a.knownHosts);
  const auto target = loadConfig(a).target(a.alias, known.path());
  std::cout << orExit(known.trust(target, a.fingerprint)) << '\n';
  auto store = openStore(g);
  orExit(store->trustHost(QString::fromStdString(a.alias), QString::fromStdString(a.fingerprint))
             .get());
}

}  // namespace

void addHostsVerb(CLI::App& app, Globals& g) {
  auto a = std::make_shared<HostArgs>();
  CLI::App* hosts = app.add_subcommand("hosts", "SSH hosts: add, ls, check, trust");
  hosts->require_subcommand(1);
  hosts->add_option("--ssh-config", a->sshConfig, "ssh config file (default ~/.ssh/config)");
  hosts->add_option("--known-hosts", a->knownHosts,
                    "known_hosts file (default ~/.ssh/known_hosts)");
  CLI::App* add = hosts->add_subcommand("add", "Remember a host (an ~/.ssh/config alias)");
  add->add_option("HOST", a->alias, "Alias or host name")->required();
  add->callback([&g, a] { addHost(g, *a); });
  hosts->add_subcommand("ls", "List remembered hosts")->callback([&g] { listHosts(g); });
  CLI::App* check = hosts->add_subcommand("check", "Compare a host's key with known_hosts");
  check->add_option("HOST", a->alias, "Alias or host name")->required();
  check->callback([&g, a] { checkHost(g, *a); });
  CLI::App* trust = hosts->add_subcommand("trust", "Accept a host's key by its fingerprint");
  trust->add_option("HOST", a->alias, "Alias or host name")->required();
  trust->add_option("FINGERPRINT", a->fingerprint, "SHA256:... as ssh-keygen -lf prints it")
      ->required();
  trust->callback([&g, a] { trustHost(g, *a); });
}

}  // namespace shardscope::cli
