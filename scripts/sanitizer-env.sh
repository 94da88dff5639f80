# Sourced by scripts/asan.sh and asan-all.sh: sanitizer settings for the tests.
# - detect_leaks: LeakSanitizer at exit fails a test that leaks.
# - abort_on_error: a report ends the process as a crash, so Qt Test's or a launcher's exit-code
#   check sees it.
# - UBSan: print_stacktrace; halting is built in (-fno-sanitize-recover=undefined).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
