#!/usr/bin/env bash
# check-packages.sh BUILD_DIR: builds the Debian packages of a configured build folder with cpack
# (rules in packaging/CMakeLists.txt) and checks that each one works on its own:
#   - prints its control fields (dpkg-deb -I) and its Depends line;
#   - unpacks it with dpkg-deb -x into a fresh temporary folder (removed on exit);
#   - runs the packaged binaries from there: shardscope-cli --version, shardscope --version
#     (offscreen), shardtrain --version and shardtrain selftest (2 local ranks over Gloo: exit 0
#     and two "done" events on stdout);
#   - proves shardtrain loads the LibTorch bundled in <tmp>/usr/lib/shardtrain, not the one it
#     was built against (ldd, with LD_LIBRARY_PATH cleared);
#   - every packaged program's --version is the package's Version (its upstream part, and
#     SHARDSCOPE_VERSION when set: the test passes CMake's PROJECT_VERSION), and the package
#     holds its man page (usr/share/man/man1/NAME.1.gz), the desktop entry (valid for
#     desktop-file-validate, which is required) and the bash completions.
# Only what the build configured is checked (a trainer-only build makes no shardscope package).
# Prints the .deb sizes and how long cpack took. Exits non-zero with a message on any failure.
# CPACK may name the cpack executable (the CTest test passes CMake's own).
set -euo pipefail

me=check-packages
fail() {
  printf '%s: FAIL: %s\n' "${me}" "$*" >&2
  exit 1
}
note() {
  printf '%s: %s\n' "${me}" "$*"
}
indent() {
  sed 's/^/    /'
}

if [[ $# -ne 1 ]]; then
  printf 'usage: %s BUILD_DIR\n' "$0" >&2
  exit 2
fi
[[ -d "$1" ]] || fail "build folder '$1' does not exist"
build_dir=$(realpath "$1")
[[ -f "${build_dir}/CPackConfig.cmake" ]] ||
  fail "${build_dir}/CPackConfig.cmake is missing: configure the build first (or nothing is packaged)"
cpack_cmd=${CPACK:-cpack}
command -v "${cpack_cmd}" >/dev/null || fail "cpack not found ('${cpack_cmd}')"
command -v dpkg-deb >/dev/null || fail "dpkg-deb not found (apt-get install dpkg)"
command -v ldd >/dev/null || fail "ldd not found (apt-get install libc-bin)"
command -v desktop-file-validate >/dev/null ||
  fail "desktop-file-validate not found (apt-get install desktop-file-utils; scripts/setup.sh --tests)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-packages.XXXXXX")
trap 'rm -rf -- "${tmp}"' EXIT

# The packaged binaries must find everything through their own RUNPATH and the system folders.
unset LD_LIBRARY_PATH LD_PRELOAD

# --- cpack ------------------------------------------------------------------------------------
note "running ${cpack_cmd} in ${build_dir}"
start=$(date +%s.%N)
if ! (cd "${build_dir}" && "${cpack_cmd}" --config CPackConfig.cmake) >"${tmp}/cpack.log" 2>&1; then
  cat "${tmp}/cpack.log" >&2
  fail "cpack failed (log above)"
fi
end=$(date +%s.%N)
cpack_seconds=$(awk -v s="${start}" -v e="${end}" 'BEGIN { printf "%.1f", e - s }')
indent <"${tmp}/cpack.log"

# cpack names every package it wrote: "CPack: - package: /path/x.deb generated."
debs=()
while IFS= read -r line; do
  if [[ ${line} =~ ^CPack:\ -\ package:\ (.*\.deb)\ generated\.$ ]]; then
    debs+=("${BASH_REMATCH[1]}")
  fi
done <"${tmp}/cpack.log"
[[ ${#debs[@]} -gt 0 ]] || fail "cpack reported no .deb package (log above)"

checked=0
version=""  # the upstream part of the package being checked, from its Version field

# check_program ROOT NAME: NAME --version prints the package's version, and its man page is there.
check_program() {
  local root=$1 name=$2 out page th
  out=$(env QT_QPA_PLATFORM=offscreen "${root}/usr/bin/${name}" --version) ||
    fail "${name} --version failed"
  [[ ${out} == "${name} ${version}" ]] ||
    fail "${name} --version prints '${out}', but its package's Version is ${version}"
  page=${root}/usr/share/man/man1/${name}.1.gz
  [[ -f ${page} ]] || fail "the package has no usr/share/man/man1/${name}.1.gz"
  gzip -t "${page}" || fail "${page} is not valid gzip data"
  th=$(zcat "${page}" | grep '^\.TH ') || fail "${name}.1.gz has no .TH line"
  [[ ${th} == ".TH \"${name^^}\" 1 "*"\"Shardscope ${version}\""* ]] ||
    fail "${name}.1.gz's title line '${th}' does not name ${name^^}(1) and version ${version}"
  note "OK: ${name} --version is ${version}; usr/share/man/man1/${name}.1.gz is there"
  checked=$((checked + 1))
}

run() {  # run LABEL COMMAND...: runs a packaged binary, prints its output, fails on non-zero
  local label=$1 out rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  printf '%s\n' "${out}" | indent
  [[ ${rc} -eq 0 ]] || fail "${label} exited with ${rc}"
  checked=$((checked + 1))
}

check_dashboard() {  # check_dashboard ROOT
  local root=$1 ran=0
  if [[ -x "${root}/usr/bin/shardscope-cli" ]]; then
    note "shardscope-cli --version"
    run "shardscope-cli --version" "${root}/usr/bin/shardscope-cli" --version
    check_program "${root}" shardscope-cli
    [[ -f "${root}/usr/share/bash-completion/completions/shardscope-cli" ]] ||
      fail "the shardscope package has no bash completion for shardscope-cli"
    ran=1
  fi
  if [[ -x "${root}/usr/bin/shardscope" ]]; then
    note "shardscope --version (QT_QPA_PLATFORM=offscreen)"
    run "shardscope --version" env QT_QPA_PLATFORM=offscreen "${root}/usr/bin/shardscope" --version
    check_program "${root}" shardscope
    ran=1
    local desktop=${root}/usr/share/applications/shardscope.desktop
    [[ -f "${desktop}" ]] || fail "the shardscope package has no share/applications/shardscope.desktop"
    desktop-file-validate --no-hints "${desktop}" || fail "desktop-file-validate rejects ${desktop}"
    note "OK: usr/share/applications/shardscope.desktop passes desktop-file-validate"
    if [[ ! -f "${root}/usr/share/icons/hicolor/scalable/apps/shardscope.svg" ]]; then
      note "warning: the shardscope package has no icon (was resources/shardscope.svg missing at configure time?)"
    fi
  fi
  [[ ${ran} -eq 1 ]] || fail "the shardscope package holds neither shardscope nor shardscope-cli"
}

check_trainer() {  # check_trainer ROOT
  local root=$1
  local exe=${root}/usr/bin/shardtrain bundle=${root}/usr/lib/shardtrain
  [[ -x "${exe}" ]] || fail "the shardtrain package has no usr/bin/shardtrain"
  [[ -f "${bundle}/libtorch_cpu.so" ]] || fail "the shardtrain package has no usr/lib/shardtrain/libtorch_cpu.so"
  [[ ! -e "${bundle}/libtorch_python.so" ]] ||
    fail "the shardtrain package bundles libtorch_python.so (the Python bindings, never needed)"
  bundle=$(realpath "${bundle}")
  local bundled=() lib
  for lib in "${bundle}"/*; do
    bundled+=("${lib##*/}")
  done
  note "bundled in usr/lib/shardtrain: ${bundled[*]}"

  # Which LibTorch does the loader pick? Nothing may be missing, and every bundled name that
  # appears must resolve into the bundle. ldd prints RUNPATH-expanded paths
  # (<tmp>/usr/bin/../lib/shardtrain/...), so real paths are compared.
  note "ldd ${exe}"
  local deps
  deps=$(ldd "${exe}") || fail "ldd ${exe} failed"
  printf '%s\n' "${deps}" | indent
  if grep -q 'not found' <<<"${deps}"; then
    fail "shardtrain has unresolved libraries (see the ldd output above)"
  fi
  local torch_cpu path
  torch_cpu=$(awk '$1 == "libtorch_cpu.so" && $2 == "=>" { print $3 }' <<<"${deps}")
  [[ -n "${torch_cpu}" ]] || fail "ldd shows no libtorch_cpu.so for shardtrain"
  torch_cpu=$(realpath -m "${torch_cpu}")
  [[ "${torch_cpu}" == "${bundle}/libtorch_cpu.so" ]] ||
    fail "libtorch_cpu.so resolves to ${torch_cpu}, not to the bundled ${bundle}/libtorch_cpu.so"
  for lib in "${bundled[@]}"; do
    path=$(awk -v n="${lib}" '$1 == n && $2 == "=>" { print $3 }' <<<"${deps}")
    if [[ -n "${path}" ]]; then
      path=$(realpath -m "${path}")
      [[ "${path}" == "${bundle}/${lib}" ]] ||
        fail "${lib} resolves to ${path}, not to the bundled copy in ${bundle}"
    fi
  done
  if grep -E -q '/\.venv/|site-packages/torch' <<<"${deps}"; then
    fail "shardtrain still loads a library from the build machine's LibTorch (.venv)"
  fi
  note "OK: libtorch_cpu.so and the other bundled libraries resolve inside the package"

  note "shardtrain --version"
  run "shardtrain --version" "${exe}" --version
  check_program "${root}" shardtrain
  [[ -f "${root}/usr/share/bash-completion/completions/shardtrain" ]] ||
    fail "the shardtrain package has no bash completion for shardtrain"

  note "shardtrain selftest (2 local ranks over Gloo)"
  local out rc=0 done_count
  out=$(cd "${tmp}" && timeout 600 "${exe}" selftest 2>"${tmp}/selftest.err") || rc=$?
  printf '%s\n' "${out}" | indent
  if [[ ${rc} -ne 0 ]]; then
    sed 's/^/    stderr: /' "${tmp}/selftest.err" >&2
    fail "shardtrain selftest exited with ${rc}"
  fi
  done_count=$(grep -c '"ev":"done"' <<<"${out}" || true)
  [[ ${done_count} -eq 2 ]] ||
    fail "shardtrain selftest printed ${done_count} \"ev\":\"done\" lines on stdout (want 2, one per rank)"
  checked=$((checked + 1))
}

# --- each package -----------------------------------------------------------------------------
sizes=()
for deb in "${debs[@]}"; do
  [[ -f "${deb}" ]] || fail "cpack reported ${deb} but it does not exist"
  pkg=$(dpkg-deb -f "${deb}" Package) || fail "dpkg-deb cannot read ${deb}"
  depends=$(dpkg-deb -f "${deb}" Depends)
  installed=$(dpkg-deb -f "${deb}" Installed-Size)
  # Version: [epoch:]upstream[-release]; the programs print the upstream part.
  version=$(dpkg-deb -f "${deb}" Version)
  version=${version#*:}
  version=${version%-*}
  if [[ -n ${SHARDSCOPE_VERSION:-} && ${version} != "${SHARDSCOPE_VERSION}" ]]; then
    fail "${pkg}'s Version is ${version}, not the project's ${SHARDSCOPE_VERSION}"
  fi
  note "=== ${pkg}: ${deb}"
  dpkg-deb -I "${deb}" | indent
  note "${pkg} Depends: ${depends}"
  root=${tmp}/${pkg}
  mkdir "${root}"
  dpkg-deb -x "${deb}" "${root}" || fail "dpkg-deb -x ${deb} failed"
  case ${pkg} in
    shardscope) check_dashboard "${root}" ;;
    shardtrain) check_trainer "${root}" ;;
    *) fail "unexpected package '${pkg}' in ${deb} (packaging/CMakeLists.txt makes shardscope and shardtrain)" ;;
  esac
  bytes=$(stat -c %s "${deb}")
  sizes+=("${deb##*/}: $(numfmt --to=iec-i --suffix=B "${bytes}") (${bytes} bytes), ${installed} KiB installed")
  rm -rf -- "${root}"
done

note "cpack took ${cpack_seconds} s"
for line in "${sizes[@]}"; do
  note "size: ${line}"
done
note "OK: ${#debs[@]} package(s), ${checked} check(s) passed"
