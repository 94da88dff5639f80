"""What the Python test scripts share: one list of failed checks for the whole process (a script
and every module it imports record into the same list), a free loopback port, and the verdict
that ends a script.

Import it with the scripts' directory idiom:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), <up>, "support"))
    from checks import FAILURES, check, finish, free_port
"""
import socket
import sys

FAILURES = []


def check(ok, what):
    """Prints `ok   WHAT` or `FAIL WHAT`; a failure is remembered for finish()."""
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)
    return ok


def free_port():
    """A TCP port free on 127.0.0.1 now (for a rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def finish():
    """The script's exit code: 1 with the count of failed checks on stderr, else 0."""
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0
