#!/usr/bin/env python3
"""Checks tests/support/with_postgres.py itself: a server that cannot start FAILS the run (exit 1,
the cause printed), never skips; a server that starts is given to the command as
SHARDSCOPE_TEST_DB and is gone, with its folder, afterwards."""
import glob
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WRAPPER = os.path.join(HERE, "with_postgres.py")


def ours(tmp):
    return set(glob.glob(os.path.join(tmp, "shardscope-pg-*")))


def main():
    # The wrapper's servers get a temporary folder of their own: the other PostgreSQL tests of a
    # parallel run start and remove theirs in the shared one meanwhile.
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # as root, the server runs as `postgres` inside it
        check(tmp)


def check(tmp):
    os.environ["TMPDIR"] = tmp
    with tempfile.TemporaryDirectory(dir=tmp) as fake:
        os.chmod(fake, 0o755)  # as root, the tools run as `postgres`
        for tool in ("initdb", "pg_ctl"):
            path = os.path.join(fake, tool)
            with open(path, "w") as f:
                f.write("#!/bin/sh\necho 'simulated: could not create directory' >&2\nexit 1\n")
            os.chmod(path, 0o755)
        env = dict(os.environ, SHARDSCOPE_PG_BINDIR=fake)
        broken = subprocess.run([sys.executable, WRAPPER, "true"], env=env, capture_output=True,
                                text=True)
    if broken.returncode != 1 or "simulated: could not create directory" not in broken.stderr:
        sys.exit(f"a server that cannot start must fail the run with its cause: "
                 f"rc {broken.returncode}, stderr {broken.stderr!r}")
    probe = ("import os, sys; url = os.environ.get('SHARDSCOPE_TEST_DB', ''); "
             "sys.exit(0 if url.startswith('postgresql://postgres@127.0.0.1:') else 7)")
    good = subprocess.run([sys.executable, WRAPPER, sys.executable, "-c", probe],
                          capture_output=True, text=True)
    if good.returncode != 0:
        sys.exit(f"with a real server the command gets SHARDSCOPE_TEST_DB: rc {good.returncode}, "
                 f"{good.stdout}{good.stderr}")
    failing = subprocess.run([sys.executable, WRAPPER, "sh", "-c", "exit 3"], capture_output=True,
                             text=True)
    if failing.returncode != 3:
        sys.exit(f"the command's exit status is the run's: rc {failing.returncode}")
    left = ours(tmp)
    if left:
        sys.exit(f"server folders left behind: {sorted(left)}")
    print("with_postgres.py: fails when the server cannot start, passes the URL, cleans up")


if __name__ == "__main__":
    main()
