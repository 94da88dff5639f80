# Image decoding, smart resize, normalisation and patchify.
target_sources(shardscope_data PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/image.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/qwen2vl_preprocess.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shapes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stb/stb_codec.cpp)
# stb (Debian's libstb-dev) is header-only; its implementation is compiled in stb/stb_codec.cpp
# only, with STB_*_STATIC so no symbol clashes with another copy of stb. As a SYSTEM include its
# code raises no front-end warnings, but GCC's -Wnull-dereference fires on stb's inlined zlib
# writer (a malloc result it does not check): silenced for that one file only. stb/.clang-tidy
# turns off the static analyzer there for the same reason.
target_include_directories(shardscope_data SYSTEM PRIVATE ${STB_INCLUDE_DIR})
# Under the sanitizers, stb's memcpy(NULL, src, 0) for a zero-length PNG IDAT chunk (legal PNG;
# the call copies nothing) is not reported: UBSan's nonnull-attribute check is off for this file.
# Debian's stb (a 2022 snapshot) does arithmetic on corrupt JPEGs that upstream stb 2.28+ checks,
# and the fuzzer met two kinds: a DC coefficient times its quantiser past int
# (stbi__jpeg_decode_block), and a bit buffer shifted by 32 when its count of bits went negative
# (stbi__grow_buffer_unsafe; tests/fuzz/corpus/image/regress-jpeg-code-bits-shift-32.jpg). Both
# only garble the pixels of a file that is corrupt anyway; ASan finds no memory error in either.
# -fwrapv makes signed overflow wrap in this file, and UBSan's signed-overflow and shift checks
# are off for this file alone (ASan and every other check still cover it). The cure is an stb of
# 2.28 or later, when Debian ships one.
set(_stb_sanitize "$<OR:$<BOOL:${SHARDSCOPE_SANITIZE}>,$<BOOL:${SHARDSCOPE_FUZZ}>>")
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/stb/stb_codec.cpp PROPERTIES
  COMPILE_OPTIONS "-Wno-null-dereference;-fwrapv;$<${_stb_sanitize}:-fno-sanitize=nonnull-attribute,signed-integer-overflow,shift>")
