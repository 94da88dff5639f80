#include "backend/lifecycle/sessionprocess.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace shardscope::backend {

Result<qint64> spawnInSession(const QStringList& argv, const QString& logPath,
                              const std::string& what, const std::string& notStarted,
                              const QStringList& environment) {
  if (argv.isEmpty()) return fail("nothing to start for " + what);
  // Everything the child touches is ready before fork(): between fork and exec a child of a
  // threaded process (the dashboard) may only make async-signal-safe calls.
  std::vector<std::string> args;
  args.reserve(std::size_t(argv.size()));
  for (const QString& a : argv) args.push_back(a.toStdString());
  std::vector<const char*> cargs;
  cargs.reserve(args.size() + 1);
  for (const std::string& a : args) cargs.push_back(a.c_str());
  cargs.push_back(nullptr);
  // The environment: this process's, less the names `environment` sets, then those.
  std::vector<std::string> envs;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const QString& set : environment) {
      replaced |= set.section(QLatin1Char('='), 0, 0).toStdString() == name;
    }
    if (!replaced) envs.push_back(entry);
  }
  for (const QString& set : environment) envs.push_back(set.toStdString());
  std::vector<const char*> cenv;
  cenv.reserve(envs.size() + 1);
  for (const std::string& e : envs) cenv.push_back(e.c_str());
  cenv.push_back(nullptr);
  const std::string log = logPath.toStdString();
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) return fail("pipe failed: cannot start " + what);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipeFds[0]);
    ::close(pipeFds[1]);
    return fail("fork failed: cannot start " + what);
  }
  if (child == 0) {
    ::close(pipeFds[0]);
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) {
      (void)!::write(pipeFds[1], &grandchild, sizeof grandchild);
      ::_exit(0);
    }
    ::close(pipeFds[1]);
    const int in = ::open("/dev/null", O_RDONLY);
    // Owner-only from its creation: a supervisor's or sweep's log may echo secrets.
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execve(cargs[0], const_cast<char* const*>(cargs.data()),
             const_cast<char* const*>(cenv.data()));
    ::_exit(127);
  }
  ::close(pipeFds[1]);
  pid_t started = -1;
  const bool read = ::read(pipeFds[0], &started, sizeof started) == sizeof started;
  ::close(pipeFds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!read || started <= 0) return fail(notStarted);
  return qint64(started);
}

}  // namespace shardscope::backend
