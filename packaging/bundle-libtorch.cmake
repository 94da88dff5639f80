# Install-time script (run by install(CODE) in packaging/CMakeLists.txt, component trainer):
# copies the LibTorch shared libraries that shardtrain actually loads into
# ${CMAKE_INSTALL_PREFIX}/lib/shardtrain, next to nothing else.
#
# Inputs (set by the install(CODE) that includes this file):
#   SHARDTRAIN_EXE    shardtrain in the build tree (its build RPATH still names the LibTorch folder)
#   TORCH_LIBDIR      the LibTorch lib folder (SHARDSCOPE_TORCH_LIBDIR)
#   BUNDLE_DIR        destination relative to the install prefix (lib/shardtrain)
#
# Dependencies are resolved from the ELF files themselves (file(GET_RUNTIME_DEPENDENCIES) reads
# NEEDED, RPATH and RUNPATH recursively), so a LibTorch that splits differently (libtorch_cuda,
# libc10_cuda...) is bundled without editing a list. System libraries stay out: dpkg-shlibdeps
# turns them into Depends. Anything else outside the LibTorch folder is an error, because the
# package would not run on a machine without it.
cmake_policy(PUSH)
cmake_policy(VERSION 3.25)

file(REAL_PATH "${TORCH_LIBDIR}" _torch_libdir)
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES "${SHARDTRAIN_EXE}"
  DIRECTORIES "${_torch_libdir}"
  RESOLVED_DEPENDENCIES_VAR _resolved
  UNRESOLVED_DEPENDENCIES_VAR _unresolved
  CONFLICTING_DEPENDENCIES_PREFIX _conflict
  # The loader and libc's own pieces never come from LibTorch.
  PRE_EXCLUDE_REGEXES "^ld-linux" "^linux-vdso" "^libc\\.so" "^libm\\.so" "^libdl\\.so"
                      "^librt\\.so" "^libpthread\\.so")

# A name found in two places (libgomp.so.1: LibTorch's own and Debian's libgomp1) counts as the
# LibTorch copy when one candidate lives there: that is the one libtorch_cpu's $ORIGIN RUNPATH
# loads, and the one the bundle's RUNPATH will load.
foreach(_name IN LISTS _conflict_FILENAMES)
  set(_pick "")
  foreach(_path IN LISTS _conflict_${_name})
    file(REAL_PATH "${_path}" _real)
    cmake_path(IS_PREFIX _torch_libdir "${_real}" NORMALIZE _in_torch)
    if(_in_torch)
      set(_pick "${_real}")
    endif()
  endforeach()
  if(_pick)
    list(APPEND _resolved "${_pick}")
  else()
    list(GET _conflict_${_name} 0 _first)
    list(APPEND _resolved "${_first}")
  endif()
endforeach()

if(_unresolved)
  message(FATAL_ERROR "shardtrain bundle: cannot resolve ${_unresolved} for ${SHARDTRAIN_EXE} "
                      "(searched its RPATH, ${_torch_libdir} and the system folders)")
endif()

set(_bundle "")
foreach(_dep IN LISTS _resolved)
  file(REAL_PATH "${_dep}" _real)
  get_filename_component(_name "${_dep}" NAME)
  cmake_path(IS_PREFIX _torch_libdir "${_real}" NORMALIZE _in_torch)
  if(_in_torch)
    if(_name MATCHES "^libtorch_python")
      message(FATAL_ERROR "shardtrain bundle: shardtrain links ${_name} (the Python bindings); "
                          "it must link libtorch/libtorch_cpu only")
    endif()
    list(APPEND _bundle "${_dep}")
  elseif(NOT _real MATCHES "^/(usr/)?lib(32|64|x32)?/")
    message(FATAL_ERROR "shardtrain bundle: ${_name} resolves to ${_real}, which is neither in "
                        "LibTorch (${_torch_libdir}) nor a system library: it would be missing on "
                        "the machine that installs the package")
  endif()
endforeach()
list(REMOVE_DUPLICATES _bundle)
list(SORT _bundle)
if(NOT _bundle)
  message(FATAL_ERROR "shardtrain bundle: ${SHARDTRAIN_EXE} needs no library from "
                      "${_torch_libdir}; is it linked to LibTorch?")
endif()

# The wheel's libraries are regular files named by their SONAME, and each carries RUNPATH
# $ORIGIN, so copied side by side they find each other (libtorch_cpu -> libc10, libgomp).
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${BUNDLE_DIR}" TYPE SHARED_LIBRARY
     FOLLOW_SYMLINK_CHAIN FILES ${_bundle})

cmake_policy(POP)
