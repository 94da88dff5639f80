#!/usr/bin/env bash
# scripts/pack-trainer-deps.sh and cmake/ShardscopeDeps.cmake's SHARDSCOPE_DEPS_DIR path, as the
# GPU check uses them on a machine without Debian's dev packages: packs the dependencies (twice:
# the script must be safe to run again), builds a consumer of every packed target from the pack,
# checks that it needs none of their shared libraries at run time and that it runs; and checks
# that a broken pack stops the configure step with one line naming the missing file.
# Usage: check_deps_dir.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
deps="$work/deps"
"$src/scripts/pack-trainer-deps.sh" "$deps"
"$src/scripts/pack-trainer-deps.sh" "$deps"
size_kib=$(du -sk "$deps" | cut -f1)
((size_kib < 20 * 1024)) || { echo "FAILED: the pack is ${size_kib} KiB (limit 20 MiB)"; exit 1; }

consumer="$src/tests/tools/deps_dir"
cmake -S "$consumer" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  "-DSHARDSCOPE_SOURCE_DIR=$src" "-DSHARDSCOPE_DEPS_DIR=$deps" >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log"; echo "FAILED: configure with SHARDSCOPE_DEPS_DIR"; exit 1; }
grep -q "dependencies from $deps" "$work/configure.log" || {
  cat "$work/configure.log"; echo "FAILED: the configure step did not use SHARDSCOPE_DEPS_DIR"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 || {
  cat "$work/build.log"; echo "FAILED: build against the pack"; exit 1; }
# Nothing from the system's packages: no -I/usr/include of theirs, no shared PCRE2/utf8proc/toml++.
if grep -E -- "-I/usr/include|-isystem /usr/include|/usr/lib/[^ ]*(pcre2|utf8proc|tomlplusplus)" \
    "$work/build/compile_commands.json" "$work/build/build.ninja" 2>/dev/null; then
  echo "FAILED: the build read the system's packages"; exit 1
fi
if ldd "$work/build/deps_dir_consumer" | grep -E "pcre2|utf8proc|tomlplusplus"; then
  echo "FAILED: the consumer loads a shared library the pack carries statically"; exit 1
fi
out=$("$work/build/deps_dir_consumer" --word "Hello")
want=$'toml qwen2\njson step 1.5\npcre2 1 5\nutf8proc åbc\nstb rejected\neigen 2.0 1.0'
[[ $out == "$want" ]] || { printf 'FAILED: consumer printed\n%s\nwanted\n%s\n' "$out" "$want"; exit 1; }

# A pack missing a file: one line that names it and the fix.
rm "$deps/lib/libutf8proc.a"
if cmake -S "$consumer" -B "$work/broken" -G Ninja "-DSHARDSCOPE_SOURCE_DIR=$src" \
    "-DSHARDSCOPE_DEPS_DIR=$deps" >"$work/broken.log" 2>&1; then
  echo "FAILED: configure accepted a pack without lib/libutf8proc.a"; exit 1
fi
grep -q "lacks lib/libutf8proc.a: run scripts/pack-trainer-deps.sh" "$work/broken.log" || {
  cat "$work/broken.log"; echo "FAILED: no one-line error naming the missing file"; exit 1; }
echo "ok: pack of $((size_kib / 1024)) MiB builds and runs its consumer; a broken pack is named"
