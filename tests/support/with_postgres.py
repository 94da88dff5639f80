#!/usr/bin/env python3
"""Runs a command against a throwaway PostgreSQL server: the `postgres` variants of the store tests.

    with_postgres.py COMMAND [ARGS...]

initdb makes a cluster in a fresh temporary folder, pg_ctl starts it on 127.0.0.1 at a free port
(and a Unix socket in that folder), never as a system service; the command runs with
SHARDSCOPE_TEST_DB=postgresql://postgres@127.0.0.1:PORT (the tests make a database of their own
on it, see tests/support/teststore.h) and SHARDSCOPE_TEST_PG_CTL, the pg_ctl command line of
that cluster (`... pg_ctl -D DATA`, run as its owner) for the tests that restart or stop it; the server is stopped and the folder removed afterwards,
also when the command fails or this script is interrupted. A server that cannot start FAILS the
run (exit status 1, with the server's log): it never skips.

initdb refuses to run as root, so as root the cluster belongs to the `postgres` user (Debian's
`postgresql` package makes it; scripts/setup.sh --tests installs the package) and initdb and
pg_ctl run through `runuser -u postgres --`. The binaries are found in $SHARDSCOPE_PG_BINDIR,
`pg_config --bindir`, or /usr/lib/postgresql/<newest>/bin.
"""
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

PREFIX = "shardscope-pg-"


def fail(message):
    print(f"with_postgres.py: {message}", file=sys.stderr)
    sys.exit(1)


def bindir():
    candidates = []
    if os.environ.get("SHARDSCOPE_PG_BINDIR"):
        candidates.append(os.environ["SHARDSCOPE_PG_BINDIR"])
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True)
        candidates.append(out.stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                      key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    candidates.extend(reversed(versions))
    for folder in candidates:
        if os.path.exists(os.path.join(folder, "initdb")) and os.path.exists(
                os.path.join(folder, "pg_ctl")):
            return folder
    fail("no PostgreSQL server binaries (initdb, pg_ctl) found: install Debian's `postgresql` "
         "(scripts/setup.sh --tests), or set SHARDSCOPE_PG_BINDIR")


def as_owner(argv):
    """argv run as the cluster's owner: `postgres` when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--"] + argv


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(bin_dir, data, mode="fast"):
    subprocess.run(as_owner([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-m", mode, "-w",
                             "-t", "30", "stop"]),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def reap_stale(bin_dir):
    """Servers left by a run that was killed (SIGKILL by a ctest timeout) are stopped here."""
    for folder in glob.glob(os.path.join(tempfile.gettempdir(), PREFIX + "*")):
        try:
            with open(os.path.join(folder, "wrapper.pid")) as f:
                pid = int(f.read().strip())
            os.kill(pid, 0)
            continue  # its wrapper still runs
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue
        if os.path.isdir(os.path.join(folder, "data")):
            stop(bin_dir, os.path.join(folder, "data"), "immediate")
        shutil.rmtree(folder, ignore_errors=True)


def main():
    if len(sys.argv) < 2:
        fail("usage: with_postgres.py COMMAND [ARGS...]")
    bin_dir = bindir()
    reap_stale(bin_dir)
    folder = tempfile.mkdtemp(prefix=PREFIX)
    with open(os.path.join(folder, "wrapper.pid"), "w") as f:
        f.write(str(os.getpid()))
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            fail("running as root, but there is no `postgres` user to own the test cluster "
                 "(apt-get install postgresql makes it)")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    data = os.path.join(folder, "data")
    log = os.path.join(folder, "server.log")
    started = False

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rc = 1
    try:
        init = subprocess.run(as_owner([os.path.join(bin_dir, "initdb"), "-D", data, "-A", "trust",
                                        "-U", "postgres", "-E", "UTF8", "--locale=C",
                                        "--no-sync"]),
                              capture_output=True, text=True)
        if init.returncode != 0:
            fail(f"initdb failed ({init.returncode}):\n{init.stdout}{init.stderr}")
        port = free_port()
        options = f"-k {folder} -p {port} -c listen_addresses=127.0.0.1 -c max_connections=200"
        start = subprocess.run(as_owner([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l", log,
                                         "-w", "-t", "60", "-o", options, "start"]),
                               capture_output=True, text=True)
        started = True
        if start.returncode != 0:
            server_log = open(log).read() if os.path.exists(log) else "(no log)"
            fail(f"the PostgreSQL test server did not start on 127.0.0.1:{port} "
                 f"({start.returncode}):\n{start.stdout}{start.stderr}\n{server_log}")
        env = dict(os.environ)
        env["SHARDSCOPE_TEST_DB"] = f"postgresql://postgres@127.0.0.1:{port}"
        env["SHARDSCOPE_TEST_PG_CTL"] = " ".join(
            as_owner([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l", log]))
        print(f"with_postgres.py: PostgreSQL server on 127.0.0.1:{port} ({bin_dir})", flush=True)
        try:
            rc = subprocess.run(sys.argv[1:], env=env).returncode
        except OSError as e:
            fail(f"cannot run {sys.argv[1]}: {e.strerror}")
    finally:
        if started:
            stop(bin_dir, data)
        shutil.rmtree(folder, ignore_errors=True)
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
