# Sourced by scripts/asan.sh and asan-all.sh: sanitizer settings for the tests.
# - detect_leaks: LeakSanitizer at exit fails a test that leaks.
# - abort_on_error: a report ends the process as a crash, so Qt Test's or a launcher's exit-code
#   check sees it.
# - UBSan: print_stacktrace; halting is built in (-fno-sanitize-recover=undefined).
# - suppressions: scripts/asan.supp and lsan.supp, third-party reports only (libxkbcommon-x11's
#   strndup on an unterminated buffer; a buffer libdbus-1 keeps to exit), both met by the Xvfb
#   workflow test; our own code has none.
_asan_supp="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/asan.supp"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:suppressions=${_asan_supp}}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$(dirname "${_asan_supp}")/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
