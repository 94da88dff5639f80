# The fuzz build (preset `fuzz`): clang with libFuzzer's coverage instrumentation on every unit
# (-fsanitize=fuzzer-no-link; the fuzz_* executables link -fsanitize=fuzzer for its main), on
# top of ASan and UBSan. Refuses to configure without clang and its libFuzzer runtime, so a CI
# that asked for fuzzing never skips it silently.
include(CheckCXXSourceCompiles)
string(CONCAT _fuzz_fix "install clang and libFuzzer (Debian 12: apt-get install clang "
       "libclang-rt-14-dev, as scripts/setup.sh --tests does) and configure with the fuzz preset")
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR " Shardscope: SHARDSCOPE_FUZZ=ON needs clang (the compiler is ${CMAKE_CXX_COMPILER_ID} "
                   "${CMAKE_CXX_COMPILER}): ${_fuzz_fix}")
endif()
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
check_cxx_source_compiles([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }
]] SHARDSCOPE_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
if(NOT SHARDSCOPE_HAVE_LIBFUZZER)
  message(FATAL_ERROR " Shardscope: clang ${CMAKE_CXX_COMPILER_VERSION} cannot link -fsanitize=fuzzer (its "
                   "libclang_rt.fuzzer is missing): ${_fuzz_fix}")
endif()
# -O1 with line tables (the preset): fast to compile on 2 cores, symbolised stacks, and assertions
# on (no NDEBUG), so a library's own checks (nlohmann's, toml++'s) fire too.
add_compile_options(-fsanitize=fuzzer-no-link)
