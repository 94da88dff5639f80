#!/usr/bin/env bash
# Proves that a wrong-way include fails the build, not only tst_layers: a small project with a
# lower library `low` and a higher one `high` that links it, both declared through the real
# shardscope_layer(... VIEW ...) of cmake/ShardscopeCompiler.cmake. high including low's header
# builds; low including high's header must fail to compile ("No such file").
# Usage: check_layer_views.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work"
mkdir -p "$work/proj/low" "$work/proj/high"
cat >"$work/proj/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(layer_views CXX)
list(APPEND CMAKE_MODULE_PATH "$src/cmake")
include(ShardscopeCompiler)
add_library(low STATIC low/low.cpp)
shardscope_layer(low VIEW low)
add_library(high STATIC high/high.cpp)
shardscope_layer(high VIEW high)
target_link_libraries(high PUBLIC low)
CMAKE
printf '#pragma once\ninline int low_value() { return 1; }\n' >"$work/proj/low/low.h"
printf '#pragma once\ninline int high_value() { return 2; }\n' >"$work/proj/high/high.h"
printf '#include "high/high.h"\n#include "low/low.h"\nint high_sum() { return high_value() + low_value(); }\n' \
  >"$work/proj/high/high.cpp"
printf '#include "low/low.h"\nint low_twice() { return 2 * low_value(); }\n' >"$work/proj/low/low.cpp"
cmake -S "$work/proj" -B "$work/build" -G Ninja >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log"; echo "FAILED: configure"; exit 1; }
cmake --build "$work/build" >"$work/right-way.log" 2>&1 || {
  cat "$work/right-way.log"; echo "FAILED: an include down the layers did not build"; exit 1; }
printf '#include "high/high.h"\n#include "low/low.h"\nint low_twice() { return 2 * low_value(); }\n' \
  >"$work/proj/low/low.cpp"
if cmake --build "$work/build" >"$work/wrong-way.log" 2>&1; then
  echo "FAILED: low/low.cpp includes high/high.h and still built"; exit 1
fi
grep -q "high/high.h" "$work/wrong-way.log" || {
  cat "$work/wrong-way.log"; echo "FAILED: the build failed, but not on the wrong-way include"; exit 1; }
echo "ok: an include down the layers builds; one up the layers does not compile"
