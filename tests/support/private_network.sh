#!/bin/sh
# Runs a command in a network namespace of its own, with only the loopback device, up, and a
# mount namespace of its own (private propagation):
#
#     private_network.sh COMMAND [ARGS...]
#
# For the tests that cut the network (tc on `lo`) under a PostgreSQL server they start inside it
# (with_postgres.py): the machine's own network is never touched. And for the ones that fill the
# server's disk (a tmpfs mounted for a tablespace): the mount ends with the namespace, also when
# the test is killed. Needs root (or an unprivileged user namespace); a namespace that cannot be
# made FAILS the run, with the cause, never skips.
if [ "$#" -lt 1 ]; then
  echo "usage: private_network.sh COMMAND [ARGS...]" >&2
  exit 1
fi
if ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
  echo "private_network.sh: needs unshare (util-linux) and ip (iproute2)" >&2
  exit 1
fi
exec unshare --net --mount --propagation private -- sh -c '
  ip link set lo up || { echo "private_network.sh: cannot bring up lo in the new namespace" >&2; exit 1; }
  exec "$@"' private_network.sh "$@"
