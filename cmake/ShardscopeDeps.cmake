# Finds third-party dependencies. Every failure stops the configure step with one line that
# names what is missing and the command that installs it (scripts/setup.sh installs all).
set(SHARDSCOPE_SETUP_HINT "run scripts/setup.sh, or")

# Stops the configure step with one unwrapped line (CMake keeps a paragraph that starts with a
# space as it is), so the message and its fix stay together in a terminal or a CI log.
function(shardscope_fatal)
  string(JOIN "" text ${ARGN})
  message(FATAL_ERROR " Shardscope: ${text}")
endfunction()

macro(shardscope_missing what pkgs)
  shardscope_fatal("${what} not found: ${SHARDSCOPE_SETUP_HINT} apt-get install ${pkgs}")
endmacro()

# SHARDSCOPE_DEPS_DIR: a folder made by scripts/pack-trainer-deps.sh (headers of toml++, CLI11,
# nlohmann-json and stb; PCRE2 and utf8proc as static archives) for a machine without Debian's
# dev packages, such as a GPU node building the trainer alone (scripts/gpu-check.sh build).
set(SHARDSCOPE_DEPS_DIR "" CACHE PATH
    "Trainer dependencies packed by scripts/pack-trainer-deps.sh (default: the system's packages)")

# shardscope_deps_dir_target(TARGET TYPE [ARCHIVE]): an imported target of SHARDSCOPE_DEPS_DIR
# under the name the system packages give it, so the targets that link it need not know.
function(shardscope_deps_dir_target target type)
  add_library(${target} ${type} IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${SHARDSCOPE_DEPS_DIR}/include")
  if(ARGN)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${SHARDSCOPE_DEPS_DIR}/lib/${ARGN}")
  endif()
endfunction()

# The packed folder in place of the system packages; each missing file is one line.
macro(shardscope_use_deps_dir)
  set(_deps_fix "run scripts/pack-trainer-deps.sh DIR on a Debian 12 machine with the project's "
                "packages (scripts/setup.sh) and pass that DIR")
  string(JOIN "" _deps_fix ${_deps_fix})
  if(NOT EXISTS "${SHARDSCOPE_DEPS_DIR}/shardscope-deps.txt")
    shardscope_fatal("SHARDSCOPE_DEPS_DIR=${SHARDSCOPE_DEPS_DIR} is not a packed dependency "
                     "folder (no shardscope-deps.txt): ${_deps_fix}")
  endif()
  foreach(_file include/nlohmann/json.hpp include/toml++/toml.h include/CLI/CLI.hpp
                include/stb/stb_image.h include/Eigen/Core include/pcre2.h include/utf8proc.h
                lib/libpcre2-8.a
                lib/libutf8proc.a)
    if(NOT EXISTS "${SHARDSCOPE_DEPS_DIR}/${_file}")
      shardscope_fatal("SHARDSCOPE_DEPS_DIR=${SHARDSCOPE_DEPS_DIR} lacks ${_file}: ${_deps_fix}")
    endif()
  endforeach()
  if(NOT TARGET nlohmann_json::nlohmann_json)
    shardscope_deps_dir_target(nlohmann_json::nlohmann_json INTERFACE)
    # toml++ header-only (its default): Debian's shared libtomlplusplus is not in the pack.
    shardscope_deps_dir_target(tomlplusplus::tomlplusplus INTERFACE)
    shardscope_deps_dir_target(CLI11::CLI11 INTERFACE)
    shardscope_deps_dir_target(Eigen3::Eigen INTERFACE)
    shardscope_deps_dir_target(PkgConfig::PCRE2 STATIC libpcre2-8.a)
    set_target_properties(PkgConfig::PCRE2 PROPERTIES INTERFACE_COMPILE_DEFINITIONS PCRE2_STATIC)
    shardscope_deps_dir_target(PkgConfig::UTF8PROC STATIC libutf8proc.a)
    set_target_properties(PkgConfig::UTF8PROC PROPERTIES INTERFACE_COMPILE_DEFINITIONS UTF8PROC_STATIC)
  endif()
  set(STB_INCLUDE_DIR "${SHARDSCOPE_DEPS_DIR}/include/stb")
  message(STATUS "Shardscope: dependencies from ${SHARDSCOPE_DEPS_DIR} (SHARDSCOPE_DEPS_DIR)")
endmacro()

# Packages every layer needs, the torch-free spec and data included.
macro(shardscope_find_common_deps)
  if(SHARDSCOPE_DEPS_DIR)
    shardscope_use_deps_dir()
  else()
    shardscope_find_system_deps()
  endif()
  find_package(Threads REQUIRED)
endmacro()

# Debian's packages (scripts/setup.sh installs them).
macro(shardscope_find_system_deps)
  find_package(nlohmann_json 3.10 QUIET)
  if(NOT nlohmann_json_FOUND)
    shardscope_missing("nlohmann-json >= 3.10" nlohmann-json3-dev)
  endif()
  find_package(tomlplusplus 3.3 QUIET)
  if(NOT tomlplusplus_FOUND)
    shardscope_missing("toml++ >= 3.3" libtomlplusplus-dev)
  endif()
  find_package(PkgConfig QUIET)
  if(NOT PkgConfig_FOUND)
    shardscope_missing("pkg-config" pkg-config)
  endif()
  pkg_check_modules(PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
  if(NOT PCRE2_FOUND)
    shardscope_missing("PCRE2 (libpcre2-8)" libpcre2-dev)
  endif()
  pkg_check_modules(UTF8PROC QUIET IMPORTED_TARGET libutf8proc)
  if(NOT UTF8PROC_FOUND)
    shardscope_missing("utf8proc" libutf8proc-dev)
  endif()
  find_path(STB_INCLUDE_DIR stb_image.h PATH_SUFFIXES stb)
  if(NOT STB_INCLUDE_DIR)
    shardscope_missing("stb (stb_image.h)" libstb-dev)
  endif()
  find_package(CLI11 2.1 QUIET)
  if(NOT CLI11_FOUND)
    shardscope_missing("CLI11 >= 2.1" libcli11-dev)
  endif()
  # Eigen (header-only): the search library's linear algebra (search/gp.cpp, LLT).
  find_package(Eigen3 3.3 QUIET NO_MODULE)
  if(NOT TARGET Eigen3::Eigen)
    shardscope_missing("Eigen >= 3.3" libeigen3-dev)
  endif()
endmacro()

# shardscope_find_qt(Component...): Qt 6.4 or newer; a missing module or an old Qt is one line.
macro(shardscope_find_qt)
  foreach(component ${ARGN})
    find_package(Qt6 QUIET COMPONENTS ${component})
    if(NOT Qt6${component}_FOUND)
      if(CMAKE_DISABLE_FIND_PACKAGE_Qt6)
        shardscope_fatal("Qt is disabled (CMAKE_DISABLE_FIND_PACKAGE_Qt6) but the "
                            "backend or GUI needs it: add -DSHARDSCOPE_BUILD_BACKEND=OFF -DSHARDSCOPE_BUILD_GUI=OFF for a trainer-only build")
      endif()
      set(_pkg qt6-base-dev)
      if(component STREQUAL "Svg")
        set(_pkg qt6-svg-dev)
      endif()
      shardscope_missing("Qt 6 module ${component} (Qt6${component})" ${_pkg})
    endif()
    if(Qt6${component}_VERSION VERSION_LESS 6.4)
      shardscope_fatal("Qt ${Qt6${component}_VERSION} is too old (need >= 6.4): "
                          "${SHARDSCOPE_SETUP_HINT} apt-get install qt6-base-dev (Debian 12 has 6.4)")
    endif()
  endforeach()
endmacro()

macro(shardscope_find_backend_deps)
  find_package(SQLite3 QUIET)
  if(NOT SQLite3_FOUND)
    shardscope_missing("SQLite 3" libsqlite3-dev)
  elseif(SQLite3_VERSION VERSION_LESS 3.35)
    # The run log's inserts read their ids back with RETURNING (one round trip on a server).
    shardscope_fatal("SQLite ${SQLite3_VERSION} is too old (need >= 3.35, for INSERT ... RETURNING): "
                     "${SHARDSCOPE_SETUP_HINT} apt-get install libsqlite3-dev (Debian 12 has 3.40)")
  endif()
  # The run log on a PostgreSQL server (--db postgresql://...): libpq.
  find_package(PostgreSQL QUIET)
  if(NOT PostgreSQL_FOUND)
    shardscope_missing("libpq (PostgreSQL client library)" libpq-dev)
  endif()
  find_package(libssh 0.10 QUIET)
  if(NOT libssh_FOUND)
    shardscope_missing("libssh >= 0.10" libssh-dev)
  endif()
  # backend/import reads accelerate's YAML config files.
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(YAML QUIET IMPORTED_TARGET GLOBAL yaml-0.1)
  endif()
  if(NOT YAML_FOUND)
    shardscope_missing("libyaml (yaml-0.1)" libyaml-dev)
  endif()
endmacro()

macro(shardscope_find_gui_deps)
  find_package(QCustomPlotQt6 QUIET)
  if(NOT QCustomPlotQt6_FOUND)
    shardscope_missing("QCustomPlot for Qt 6 (QCustomPlotQt6)" "libqcustomplot-dev libqcustomplot2.1-qt6")
  endif()
endmacro()
