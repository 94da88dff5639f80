// `hosts add|ls|check|trust`: SSH hosts for launch.kind = "ssh". Hosts are ~/.ssh/config aliases
// (or names); `check` connects without logging in and compares the host key with known_hosts
// (`check --steps`: every diagnostic step the Hosts panel shows, printed as each one finishes);
// `trust HOST SHA256:...` adds the key the host offers only when its fingerprint is the one the
// user checked out of band (as `ssh-keygen -lf` prints it).
#include <QJsonArray>
#include <QJsonObject>

#include <algorithm>
#include <iostream>

#include "app/cli/cli_common.h"
#include "backend/ssh/hostcheck.h"
#include "backend/ssh/knownhosts.h"
#include "backend/ssh/sshconfig.h"

namespace shardscope::cli {
namespace {

struct HostArgs {
  std::string alias;
  std::string fingerprint;
  std::string sshConfig;               // --ssh-config; empty: ~/.ssh/config
  std::string knownHosts;              // --known-hosts; empty: ~/.ssh/known_hosts
  bool steps = false;                  // check --steps
  std::string trainer = "shardtrain";  // check --trainer
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

// `check --steps`: resolve, connect, host key, authenticate, trainer, GPUs, Slurm, each line
// printed when its step ends; exit 0 when every required step passed.
void checkHostSteps(const Globals& g, const HostArgs& a) {
  backend::HostCheckRequest request;
  request.alias = QString::fromStdString(a.alias);
  request.sshConfigPath = QString::fromStdString(a.sshConfig);
  request.knownHostsPath = QString::fromStdString(a.knownHosts);
  request.trainer = QString::fromStdString(a.trainer);
  QJsonArray steps;
  const auto outcome = backend::runHostCheck(request, [&](const backend::CheckStep& step) {
    if (step.state == backend::CheckStep::State::running) return;
    const QString state = backend::stateName(step.state);
    steps.append(QJsonObject{{"id", step.id}, {"state", state}, {"detail", step.detail}});
    if (!g.json) {
      std::cout << step.title.leftJustified(18).toStdString()
                << state.leftJustified(15).toStdString() << step.detail.toStdString() << std::endl;
    }
  });
  // Steps after a failure are never tried: listed as skipped, as the Hosts panel shows them.
  for (const auto& step : backend::hostCheckSteps()) {
    const bool reported = std::any_of(steps.begin(), steps.end(), [&](const QJsonValue& v) {
      return v.toObject()["id"].toString() == step.id;
    });
    if (reported) continue;
    const QString state = backend::stateName(backend::CheckStep::State::skipped);
    steps.append(QJsonObject{{"id", step.id}, {"state", state}, {"detail", QString()}});
    if (!g.json)
      std::cout << step.title.leftJustified(18).toStdString() << state.toStdString() << '\n';
  }
  if (g.json) {
    QJsonObject out{{"alias", request.alias},
                    {"ok", outcome.ok},
                    {"steps", steps},
                    {"host_key", outcome.hostKey},
                    {"gpus", QJsonArray::fromStringList(outcome.gpus)},
                    {"partitions", QJsonArray::fromStringList(outcome.partitions)}};
    if (outcome.offer) {
      out["offered"] = QJsonObject{{"key_type", outcome.offer->keyType},
                                   {"fingerprint", outcome.offer->fingerprint},
                                   {"message", outcome.offer->message}};
    }
    printJson(out);
  } else if (outcome.offer && !outcome.offer->changed) {
    std::cout << "trust it with `shardscope-cli hosts trust " << a.alias << ' '
              << outcome.offer->fingerprint.toStdString() << "` after comparing the fingerprint\n";
  }
  if (!outcome.ok) throw VerbExit{kExitError};
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
  check->add_flag("--steps", a->steps,
                  "Run every diagnostic step: resolve, connect, host key, authenticate, trainer, "
                  "GPUs, Slurm");
  check
      ->add_option("--trainer", a->trainer,
                   "With --steps: the trainer program (or path) to look for on the host")
      ->capture_default_str();
  check->callback([&g, a] { a->steps ? checkHostSteps(g, *a) : checkHost(g, *a); });
  CLI::App* trust = hosts->add_subcommand("trust", "Accept a host's key by its fingerprint");
  trust->add_option("HOST", a->alias, "Alias or host name")->required();
  trust->add_option("FINGERPRINT", a->fingerprint, "SHA256:... as ssh-keygen -lf prints it")
      ->required();
  trust->callback([&g, a] { trustHost(g, *a); });
}

}  // namespace shardscope::cli
