# Warnings, sanitizers and ccache for Shardscope's own targets (never for third-party code:
# Qt, LibTorch and Debian's headers come in as SYSTEM includes through their imported targets).
find_program(SHARDSCOPE_CCACHE ccache)
if(SHARDSCOPE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  # ccache caches compiles that use a precompiled header only with this sloppiness. The base dir
  # makes paths inside the clone relative, and NOHASHDIR keeps the working folder out of the hash
  # of compiles with debug info (the asan and fuzz trees), so a clone in another folder (CI's) and
  # a tree at the same depth (build/, build-asan-ci/, the reduced trees) hit what this machine
  # compiled before. All the trees of a full test run can hold more than ccache's default 5 GB,
  # and a run would then evict its own first trees: hence the larger size.
  set(_ccache ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=20G ${SHARDSCOPE_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${_ccache})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_ccache})
endif()

add_library(shardscope_warnings INTERFACE)
target_compile_options(shardscope_warnings INTERFACE
  -Wall -Wextra -Wpedantic $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local> -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough -Wno-missing-field-initializers
  $<$<BOOL:${SHARDSCOPE_WERROR}>:-Werror>)

# UBSan stops at its first report (-fno-sanitize-recover), so undefined behaviour fails a test
# instead of printing a line nobody reads.
if(SHARDSCOPE_SANITIZE OR SHARDSCOPE_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
endif()
if(SHARDSCOPE_FUZZ)
  include(ShardscopeFuzz)
endif()

# shardscope_layer(TARGET [VIEW FOLDER...]) marks a target as ours: warnings on, includes rooted
# at the repo so every include names its layer ("spec/events.h"), which
# tests/tools/check_layers.py reads. A library given VIEW publishes only its own FOLDERs (or one
# header): its include root is build/layers/TARGET/, which holds a link to each and nothing else. A unit
# of the library then finds the headers of its own folders and of the libraries it links, so an
# include of a layer above or beside it (one it does not link) fails to compile with "No such
# file". Executables (the app, tools, tests) see the whole tree.
function(shardscope_layer target)
  cmake_parse_arguments(L "" "" "VIEW" ${ARGN})
  target_link_libraries(${target} PRIVATE shardscope_warnings)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  elseif(L_VIEW)
    set(view ${PROJECT_BINARY_DIR}/layers/${target})
    foreach(folder ${L_VIEW})
      get_filename_component(parent ${view}/${folder} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      if(NOT IS_SYMLINK ${view}/${folder})
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${view}/${folder} SYMBOLIC)
      endif()
    endforeach()
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${view}> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>)
  else()
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>)
  endif()
endfunction()
