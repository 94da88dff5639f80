#!/usr/bin/env bash
# Installs what Shardscope needs on a fresh Debian 12 machine, and nothing twice.
#   scripts/setup.sh           build + run dependencies (Debian packages, LibTorch venv)
#   scripts/setup.sh --tests   also the test-only servers and Python references
#   scripts/setup.sh --cuda    also a CUDA LibTorch in .venv-cuda (for the cuda-build test)
# Safe to run again: every step checks before it installs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want_tests=0 want_cuda=0
for arg in "$@"; do
  case "$arg" in
    --tests) want_tests=1 ;;
    --cuda) want_cuda=1 ;;
    *) echo "setup.sh: unknown option '$arg' (use --tests, --cuda or nothing)" >&2; exit 2 ;;
  esac
done

# Build and runtime packages. Kept in one list so the README, CI and packaging agree.
build_pkgs=(
  build-essential cmake ninja-build ccache pkg-config git file dpkg-dev zstd
  qt6-base-dev qt6-svg-dev libgl-dev
  libqcustomplot-dev libqcustomplot2.1-qt6
  libsqlite3-dev sqlite3 libpq-dev libssh-dev libyaml-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libstb-dev libeigen3-dev
  libpcre2-dev libutf8proc-dev libbenchmark-dev
  clang-format clang-tidy
)
# Servers the integration tests start on loopback (never as system services).
# clang + libclang-rt-14-dev: libFuzzer and clang's sanitizer runtimes for scripts/fuzz.sh
# (Debian 12's clang is clang-14; its libclang_rt.fuzzer is in libclang-rt-14-dev).
# xvfb + xauth: the dashboard's workflow test (tst_liverun) drives real windows on an X server.
# groff-base: tst_manpages renders the generated man pages with groff and fails on a warning.
# dbus-daemon: dbus-run-session, the private session bus tst_notifications runs the dashboard on
# (its test registers org.freedesktop.Notifications there).
# postgresql: initdb and pg_ctl for the `postgres` test variants (tests/support/with_postgres.py
# starts a throwaway cluster in a temporary folder; the package's own cluster is not used).
test_pkgs=(openssh-server openssh-client slurm-wlm munge procps psmisc desktop-file-utils groff-base
  clang libclang-rt-14-dev xvfb xauth dbus-daemon postgresql)

missing_pkgs() {
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      echo "$p"
    fi
  done
}

pkgs=("${build_pkgs[@]}")
if ((want_tests)); then pkgs+=("${test_pkgs[@]}"); fi
mapfile -t todo < <(missing_pkgs "${pkgs[@]}")
if ((${#todo[@]})); then
  echo "setup: installing ${#todo[@]} Debian packages: ${todo[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  # Debian's service scripts must not start sshd/slurm/munge as system services here.
  export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${todo[@]}" >/dev/null
else
  echo "setup: Debian packages present"
fi

# LibTorch comes from the CPU wheel of PyTorch in a project venv; its share/cmake/Torch
# serves find_package(Torch). The product never runs Python: the venv only carries the library
# (and, with --tests, the reference implementations the tests compare against).

# The venvs live in a cache keyed on what they hold (the requirements files' bytes, those they
# include with -r, and the Python version), and the checkout's .venv is a link to it: a new clone
# (CI's, a second worktree) links what a clone before it installed, in a second, instead of
# writing 7 GB again (3.5 minutes here). SHARDSCOPE_VENV_CACHE names the cache folder; set to
# "off", or with a real .venv folder already in the checkout, the venv is made in place.
venv_cache=${SHARDSCOPE_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardscope/venvs}

# requirement_files REQ: REQ and every file it includes with -r, recursively.
requirement_files() {
  local req=$1 inc
  echo "$req"
  while read -r inc; do
    requirement_files "$(dirname "$req")/$inc"
  done < <(sed -n 's/^[[:space:]]*-r[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$req")
}

# install_venv DIR REQUIREMENTS: a venv with those packages, skipped when already installed.
install_venv() {
  local venv=$1 req=$2 key stamp
  key=$( (python3 --version; requirement_files "$req" | xargs cat) | sha256sum | cut -c1-16)
  if [[ $venv_cache != off && (-L $venv || ! -e $venv) ]]; then
    local cached="$venv_cache/$(basename "$venv")-$key"
    mkdir -p "$venv_cache"
    # One installer per cached venv at a time: another clone's setup may be filling it.
    exec {lock}>"$cached.lock"
    flock "$lock"
    fill_venv "$cached" "$req" "$key"
    exec {lock}>&-
    ln -sfn "$cached" "$venv"
    echo "setup: $(basename "$venv") -> $cached"
    return
  fi
  fill_venv "$venv" "$req" "$key"
}

# fill_venv DIR REQUIREMENTS KEY: creates DIR and pip-installs REQUIREMENTS into it, unless the
# stamp of KEY says it holds them.
fill_venv() {
  local venv=$1 req=$2 stamp="$1/.installed-$(basename "$2" .txt)-$3"
  if [[ ! -x "$venv/bin/python" ]]; then
    echo "setup: creating $venv"
    python3 -m venv "$venv"
  fi
  if [[ -f "$stamp" ]]; then
    echo "setup: Python packages present ($(basename "$req") in $venv)"
    return
  fi
  echo "setup: pip install -r $(basename "$req") into $venv"
  # pip warns once per package about this machine's optional local indexes; that is noise here.
  "$venv/bin/python" -m pip install -q -r "$req" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  touch "$stamp"
}

req="$root/requirements-torch.txt"
if ((want_tests)); then req="$root/requirements-test.txt"; fi
install_venv "$root/.venv" "$req"
if ((want_cuda)); then
  install_venv "$root/.venv-cuda" "$root/requirements-cuda.txt"
fi
