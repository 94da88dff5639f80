# Finds LibTorch for the trainer and checks that it can do what the sharding engine needs:
# version >= 2.6 and c10d with the Gloo backend (all-gather/reduce-scatter into tensors).
#
# SHARDSCOPE_LIBTORCH_DIR is the one variable to point at another LibTorch: the folder that holds
# share/cmake/Torch (the unzipped pytorch.org LibTorch, or a wheel's site-packages/torch, such as
# a CUDA build). Default: the torch package in the project's .venv (scripts/setup.sh makes it).
set(SHARDSCOPE_LIBTORCH_DIR "" CACHE PATH
    "LibTorch folder holding share/cmake/Torch (default: .venv's torch from scripts/setup.sh)")
set(SHARDSCOPE_TORCH_MIN_VERSION 2.6)

function(_shardscope_default_libtorch out)
  file(GLOB candidates LIST_DIRECTORIES true
       "${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/torch")
  list(SORT candidates)
  list(GET candidates -1 last)
  set(${out} "${last}" PARENT_SCOPE)
endfunction()

macro(shardscope_find_torch)
  set(_torch_root "${SHARDSCOPE_LIBTORCH_DIR}")
  if(NOT _torch_root)
    _shardscope_default_libtorch(_torch_root)
  endif()
  set(_fix "run scripts/setup.sh (installs torch==2.13.0 into .venv) or pass -DSHARDSCOPE_LIBTORCH_DIR=/path/to/libtorch")
  if(NOT _torch_root OR NOT EXISTS "${_torch_root}/share/cmake/Torch/TorchConfig.cmake")
    shardscope_fatal("LibTorch not found (no share/cmake/Torch under "
                        "'${_torch_root}'): ${_fix}")
  endif()
  # Wheels expect CUDA's own CMake support to find the toolkit; we only need the libraries.
  set(CAFFE2_USE_CUDNN ON)
  find_package(Torch CONFIG QUIET PATHS "${_torch_root}/share/cmake/Torch" NO_DEFAULT_PATH)
  if(NOT Torch_FOUND)
    shardscope_fatal("LibTorch at '${_torch_root}' did not load: ${_fix}")
  endif()
  if(Torch_VERSION VERSION_LESS SHARDSCOPE_TORCH_MIN_VERSION)
    shardscope_fatal("LibTorch ${Torch_VERSION} at '${_torch_root}' is too old "
                        "(need >= ${SHARDSCOPE_TORCH_MIN_VERSION}: older Gloo lacks the tensor "
                        "collectives): ${_fix}")
  endif()
  set(_c10d "${_torch_root}/include/torch/csrc/distributed/c10d")
  set(_defs "")
  if(TARGET torch_cpu)
    get_target_property(_defs torch_cpu INTERFACE_COMPILE_DEFINITIONS)
  endif()
  if(NOT EXISTS "${_c10d}/ProcessGroupGloo.hpp" OR NOT "USE_C10D_GLOO" IN_LIST _defs)
    shardscope_fatal("LibTorch ${Torch_VERSION} at '${_torch_root}' has no c10d "
                        "Gloo backend (built without USE_DISTRIBUTED/USE_GLOO): ${_fix}")
  endif()
  # PyTorch wheels ship ProcessGroupGloo.hpp but not the gloo headers it includes. Ours in
  # trainer/dist/gloo_decl declare just the four gloo names that header mentions; see
  # docs/design/2026-11-22-gloo-from-the-wheel.md for why that is ABI-safe.
  if(EXISTS "${_torch_root}/include/gloo/context.h")
    set(SHARDSCOPE_GLOO_DECL OFF)
  else()
    set(SHARDSCOPE_GLOO_DECL ON)
  endif()
  set(SHARDSCOPE_TORCH_CUDA OFF)
  if(EXISTS "${_torch_root}/lib/libc10_cuda.so")
    set(SHARDSCOPE_TORCH_CUDA ON)
  endif()
  set(SHARDSCOPE_TORCH_ROOT "${_torch_root}")
  set(SHARDSCOPE_TORCH_LIBDIR "${_torch_root}/lib")
  message(STATUS "Shardscope: LibTorch ${Torch_VERSION} at ${_torch_root} "
                 "(CUDA: ${SHARDSCOPE_TORCH_CUDA}, gloo declarations: ${SHARDSCOPE_GLOO_DECL})")
endmacro()
