#!/usr/bin/env bash
# Packs the trainer's build dependencies other than LibTorch into DIR, for a machine that has a
# compiler, CMake and a LibTorch but none of Debian's dev packages (the GPU machine of
# scripts/gpu-check.sh): the headers of toml++, CLI11, nlohmann-json, stb and Eigen, and PCRE2
# (libpcre2-8) and utf8proc as static archives with their headers, so the shardtrain built there
# needs no shared library of theirs at run time. About 13 MiB (Eigen is 7).
#
#   scripts/pack-trainer-deps.sh DIR
#   cmake --preset trainer-only -DSHARDSCOPE_DEPS_DIR=DIR ...   (cmake/ShardscopeDeps.cmake)
#
# Copies the files of this machine's installed Debian packages (scripts/setup.sh installs them),
# with their copyright files. Safe to run again: DIR is rebuilt each time, but only when it is
# new, empty or an earlier pack (it holds shardscope-deps.txt), never over other files.
set -euo pipefail

usage() { echo "usage: scripts/pack-trainer-deps.sh DIR (a new or empty folder, or an earlier pack)" >&2; }
if [[ $# -ne 1 || -z $1 || $1 == -* ]]; then
  usage
  exit 2
fi
dir=${1%/}
manifest=shardscope-deps.txt
if [[ -e $dir && ! -d $dir ]]; then
  echo "pack-trainer-deps: $dir exists and is not a folder: give a new folder" >&2
  exit 2
fi
if [[ -d $dir && -n $(ls -A "$dir") && ! -f $dir/$manifest ]]; then
  echo "pack-trainer-deps: $dir holds other files (no $manifest): give a new or empty folder" >&2
  exit 2
fi

# package -> files it must provide (path suffixes as dpkg -L lists them).
pkgs=(libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libstb-dev libeigen3-dev libpcre2-dev
  libutf8proc-dev)
declare -A wants=(
  [libtomlplusplus-dev]="/include/toml++/toml.h"
  [libcli11-dev]="/include/CLI/CLI.hpp"
  [nlohmann-json3-dev]="/include/nlohmann/json.hpp"
  [libstb-dev]="/include/stb/stb_image.h"
  [libeigen3-dev]="/include/eigen3/Eigen/Core"
  [libpcre2-dev]="/include/pcre2.h /libpcre2-8.a"
  [libutf8proc-dev]="/include/utf8proc.h /libutf8proc.a"
)

# owned PKG SUFFIX: the one file of PKG whose path ends in SUFFIX, or nothing.
owned() {
  dpkg -L "$1" 2>/dev/null | awk -v s="$2" \
    '!hit && length($0) >= length(s) && substr($0, length($0) - length(s) + 1) == s { print; hit = 1 }'
}

tmp="$dir.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include" "$tmp/lib" "$tmp/licenses"
{
  echo "# Trainer build dependencies packed by scripts/pack-trainer-deps.sh; read by"
  echo "# cmake/ShardscopeDeps.cmake when configured with -DSHARDSCOPE_DEPS_DIR=this folder."
  echo "format 1"
  echo "arch $(dpkg --print-architecture)"
} >"$tmp/$manifest"
for pkg in "${pkgs[@]}"; do
  version=$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null || true)
  if [[ $version != "install ok installed "* ]]; then
    echo "pack-trainer-deps: $pkg is not installed: run scripts/setup.sh, or apt-get install $pkg" >&2
    exit 1
  fi
  for want in ${wants[$pkg]}; do
    path=$(owned "$pkg" "$want")
    if [[ -z $path || ! -f $path ]]; then
      echo "pack-trainer-deps: $pkg has no file ending in $want: reinstall it (apt-get install --reinstall $pkg)" >&2
      exit 1
    fi
    case "$want" in
      /include/eigen3/Eigen/*) # Eigen's headers: the Eigen folder (src/ included) as include/Eigen
        cp -a "$(dirname "$path")" "$tmp/include/" ;;
      /include/*/*) # a header folder: copy the whole folder (toml++/impl, CLI/impl...)
        src=$(dirname "$path")
        cp -a "$src" "$tmp/include/" ;;
      /include/*) cp -a "$path" "$tmp/include/" ;;
      *.a) cp -a "$path" "$tmp/lib/" ;;
    esac
  done
  mkdir -p "$tmp/licenses/$pkg"
  cp "/usr/share/doc/$pkg/copyright" "$tmp/licenses/$pkg/" 2>/dev/null || true
  echo "package $pkg ${version#install ok installed }" >>"$tmp/$manifest"
done
size_kib=$(du -sk "$tmp" | cut -f1)
if ((size_kib > 20 * 1024)); then
  echo "pack-trainer-deps: the pack is $((size_kib / 1024)) MiB, over the 20 MiB it should take" >&2
  exit 1
fi
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "pack-trainer-deps: $dir: ${#pkgs[@]} packages, $((size_kib / 1024)).$(((size_kib % 1024) * 10 / 1024)) MiB"
