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
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/stb/stb_codec.cpp PROPERTIES
  COMPILE_OPTIONS "-Wno-null-dereference;$<$<OR:$<BOOL:${SHARDSCOPE_SANITIZE}>,$<BOOL:${SHARDSCOPE_FUZZ}>>:-fno-sanitize=nonnull-attribute>")
