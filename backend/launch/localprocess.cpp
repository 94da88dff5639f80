// Why posix_spawn and not QProcess: QProcess kills its child when the QProcess object dies, and
// a rank must outlive the backend. POSIX_SPAWN_SETSID makes each rank a session leader, so
// every process it starts can be found (same session id) and ended with it. A detached process
// (a supervisor, a sweep) is forked twice instead, so init, not this process, is its parent.
#include "backend/launch/localprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <features.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QFile>
#include <QHash>
#include <QMutex>
#include <QMutexLocker>
#include <QProcessEnvironment>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace shardscope::backend::localproc {

namespace {

/// Exit statuses this process reaped, keyed by pid; the start time tells a reused pid.
struct Reaped {
  qint64 startTicks = 0;
  ExitInfo exit;
};
QMutex g_reapedMutex;
QHash<qint64, Reaped>& reapedTable() {
  static QHash<qint64, Reaped> table;
  return table;
}

ExitInfo fromWaitStatus(int status) {
  ExitInfo info;
  info.known = true;
  if (WIFEXITED(status)) info.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) info.signal = WTERMSIG(status);
  return info;
}

std::string errnoText(int err) { return std::strerror(err); }

/// Owns the spawn attributes and file actions for one posix_spawn call.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawnattr_init(&m_attr);
    posix_spawn_file_actions_init(&m_actions);
  }
  ~SpawnSetup() {
    posix_spawnattr_destroy(&m_attr);
    posix_spawn_file_actions_destroy(&m_actions);
    for (int fd : m_fds) ::close(fd);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  /// New session, empty signal mask, default dispositions (the backend may ignore SIGPIPE).
  void setSessionAndSignals() {
    sigset_t none;
    sigset_t all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&m_attr, &none);
    posix_spawnattr_setsigdefault(&m_attr, &all);
    posix_spawnattr_setflags(&m_attr,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }

  /// Opens `path` for appending here (so a missing folder is reported with its name) and
  /// makes it descriptor `target` in the child.
  Result<void> redirect(const QString& path, int target) {
    const QByteArray name = QFile::encodeName(path);
    // Owner-only from its creation: a rank's or supervisor's output may echo secrets.
    const int fd = ::open(name.constData(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
      return fail("cannot open " + path.toStdString() + " for the rank's output: " +
                  errnoText(errno) + "; check that the run directory exists and is writable");
    }
    m_fds.push_back(fd);
    posix_spawn_file_actions_adddup2(&m_actions, fd, target);
    return ok();
  }

  void stdinFromDevNull() {
    posix_spawn_file_actions_addopen(&m_actions, 0, "/dev/null", O_RDONLY, 0);
  }

  void chdirTo(const QByteArray& dir) {
    m_dir = dir;
    posix_spawn_file_actions_addchdir_np(&m_actions, m_dir.constData());
  }

  /// The rank must not hold the backend's database, sockets or pipes.
  void closeOtherDescriptors() {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
    posix_spawn_file_actions_addclosefrom_np(&m_actions, 3);
#endif
  }

  const posix_spawnattr_t* attr() const { return &m_attr; }
  const posix_spawn_file_actions_t* actions() const { return &m_actions; }

 private:
  posix_spawnattr_t m_attr{};
  posix_spawn_file_actions_t m_actions{};
  std::vector<int> m_fds;
  QByteArray m_dir;
};

/// NUL-terminated char* arrays over QByteArrays that live as long as this object.
class CStrings {
 public:
  explicit CStrings(const QStringList& items) {
    m_bytes.reserve(items.size());
    for (const QString& item : items) m_bytes.push_back(item.toLocal8Bit());
    for (QByteArray& b : m_bytes) m_ptrs.push_back(b.data());
    m_ptrs.push_back(nullptr);
  }
  char* const* data() const { return m_ptrs.data(); }

 private:
  std::vector<QByteArray> m_bytes;
  std::vector<char*> m_ptrs;
};

// Opens `path` for appending, owner-only from its creation (a log may echo secrets).
Result<int> openOutput(const QString& path) {
  const int fd =
      ::open(QFile::encodeName(path).constData(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail("cannot open " + path.toStdString() + " for the output of a process: " +
                errnoText(errno) + "; check that its folder exists and is writable");
  }
  return fd;
}

// fork, setsid, fork again, exec: the grandchild's pid comes back through a pipe. Everything the
// children touch is ready before the first fork: between fork and exec a child of a threaded
// process (the dashboard) may only make async-signal-safe calls.
Result<Spawned> spawnDetached(const SpawnSpec& spec) {
  QStringList argv{spec.program};
  argv += spec.args;
  const CStrings cargv(argv);
  const CStrings cenv(spec.env);
  const QByteArray program = QFile::encodeName(spec.program);
  const QByteArray dir = QFile::encodeName(spec.workDir);
  const std::string what = "cannot start " + spec.program.toStdString();
  auto opened = openOutput(spec.stdoutPath);
  if (!opened) return opened.error();
  const int out = *opened;
  if (spec.stderrPath != spec.stdoutPath) opened = openOutput(spec.stderrPath);
  if (!opened) {
    ::close(out);
    return opened.error();
  }
  const int err = spec.stderrPath == spec.stdoutPath ? out : *opened;
  int in = -1;
  int pipeFds[2] = {-1, -1};
  const auto closeAll = [&] {
    for (const int fd : {out, err == out ? -1 : err, in, pipeFds[0], pipeFds[1]})
      if (fd >= 0) ::close(fd);
  };
  in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || ::pipe2(pipeFds, O_CLOEXEC) != 0) {
    const std::string why = errnoText(errno);
    closeAll();
    return fail(what + ": " + why);
  }
  sigset_t none;
  sigemptyset(&none);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    const std::string why = errnoText(errno);
    closeAll();
    return fail(what + ": fork failed: " + why);
  }
  if (child == 0) {
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) {
      (void)!::write(pipeFds[1], &grandchild, sizeof grandchild);
      ::_exit(0);
    }
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    if (!dir.isEmpty() && ::chdir(dir.constData()) != 0) ::_exit(127);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(program.constData(), cargv.data(), cenv.data());
    ::_exit(127);
  }
  pid_t started = -1;
  ::close(pipeFds[1]);
  pipeFds[1] = -1;
  const bool read = ::read(pipeFds[0], &started, sizeof started) == sizeof started;
  int status = 0;
  ::waitpid(child, &status, 0);
  closeAll();
  if (!read || started <= 0) return fail(what + ": the second fork failed");
  Spawned spawned;
  spawned.pid = started;
  if (auto st = readProcStat(started)) spawned.startTicks = st->startTicks;
  return spawned;
}

}  // namespace

std::optional<ProcStat> readProcStat(qint64 pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // The command name (field 2) may hold spaces and ')': fields restart after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return std::nullopt;
  ProcStat st;
  long long fields[20] = {};
  char state = '?';
  // Fields 3..22: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime priority nice num_threads itrealvalue starttime.
  const int got = std::sscanf(p + 1,
                              " %c %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
                              "%lld %lld %lld %lld %lld %lld %lld",
                              &state, &fields[0], &fields[1], &fields[2], &fields[3], &fields[4],
                              &fields[5], &fields[6], &fields[7], &fields[8], &fields[9],
                              &fields[10], &fields[11], &fields[12], &fields[13], &fields[14],
                              &fields[15], &fields[16], &fields[17], &fields[18]);
  if (got < 20) return std::nullopt;
  st.state = state;
  st.ppid = fields[0];
  st.pgrp = fields[1];
  st.session = fields[2];
  st.startTicks = fields[18];
  return st;
}

Result<Spawned> spawnInSession(const SpawnSpec& spec) {
  if (spec.detached) return spawnDetached(spec);
  SpawnSetup setup;
  setup.setSessionAndSignals();
  setup.stdinFromDevNull();
  if (auto r = setup.redirect(spec.stdoutPath, STDOUT_FILENO); !r) return r.error();
  if (auto r = setup.redirect(spec.stderrPath, STDERR_FILENO); !r) return r.error();
  setup.chdirTo(QFile::encodeName(spec.workDir));
  setup.closeOtherDescriptors();

  QStringList argv{spec.program};
  argv += spec.args;
  const CStrings cargv(argv);
  const CStrings cenv(spec.env);
  const QByteArray program = QFile::encodeName(spec.program);
  pid_t pid = 0;
  // glibc reports a failed exec (missing file, no permission, bad format) as the return value.
  const int rc = posix_spawn(&pid, program.constData(), setup.actions(), setup.attr(), cargv.data(),
                             cenv.data());
  if (rc != 0) {
    return fail("launch.trainer: cannot start " + spec.program.toStdString() + ": " +
                errnoText(rc) +
                "; set launch.trainer to an executable trainer (shardtrain) on this machine");
  }
  Spawned out;
  out.pid = pid;
  // Our unreaped child cannot vanish, so its stat is readable now, even if it already exited.
  if (auto st = readProcStat(pid)) out.startTicks = st->startTicks;
  return out;
}

QStringList environmentWith(const QStringList& set) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const QString& entry : set) {
    env.insert(entry.section(QLatin1Char('='), 0, 0), entry.section(QLatin1Char('='), 1));
  }
  return env.toStringList();
}

QList<qint64> sessionMembers(qint64 sid) {
  QList<qint64> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long long pid = std::strtoll(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 0) continue;
    const auto st = readProcStat(pid);
    if (st && st->session == sid && st->state != 'Z' && st->state != 'X') out.append(pid);
  }
  ::closedir(dir);
  return out;
}

int signalSession(qint64 sid, qint64 startTicks, int sig) {
  if (sid <= 1) return 0;
  const auto leader = readProcStat(sid);
  // A session id stays allocated while any member lives, so the number can only have been
  // reused when the old session is empty: a different leader means nothing of ours is left.
  if (leader && startTicks > 0 && leader->startTicks != startTicks) return 0;
  if (leader && leader->session == sid) ::kill(static_cast<pid_t>(-sid), sig);
  int count = 0;
  for (qint64 pid : sessionMembers(sid)) {
    if (::kill(static_cast<pid_t>(pid), sig) == 0) ++count;
  }
  return count;
}

Probe probe(qint64 pid, qint64 startTicks) {
  QMutexLocker lock(&g_reapedMutex);
  auto& table = reapedTable();
  if (auto it = table.constFind(pid); it != table.constEnd() && it->startTicks == startTicks) {
    return Probe{false, it->exit};
  }
  const auto st = readProcStat(pid);
  if (!st || (startTicks > 0 && st->startTicks != startTicks)) return Probe{false, {}};
  int status = 0;
  const pid_t r = ::waitpid(static_cast<pid_t>(pid), &status, WNOHANG);
  if (r == static_cast<pid_t>(pid)) {
    const ExitInfo info = fromWaitStatus(status);
    table.insert(pid, Reaped{startTicks, info});
    return Probe{false, info};
  }
  if (r == 0) return Probe{true, {}};
  // Not our child (another backend started it): a zombie has ended, its parent reaps it.
  const bool ended = st->state == 'Z' || st->state == 'X';
  return Probe{!ended, {}};
}

int openPidfd(qint64 pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0);
  if (fd >= 0) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace shardscope::backend::localproc
