# Qt6::Test hands each unit that links it its target's absolute folders, for QFINDTESTDATA
# (QT_TESTCASE_SOURCEDIR, and QT_TESTCASE_BUILDDIR, which QTEST_MAIN expands into every test's
# main unit). No test uses QFINDTESTDATA: tests find their files through tests/support/paths.h.
# Left in, those folders would make every test unit compile differently in each clone folder,
# which ccache cannot share between clones; without them QFINDTESTDATA still works, relative to
# the test's source file and executable.
if(TARGET Qt6::Test)
  get_target_property(_qt_test_defs Qt6::Test INTERFACE_COMPILE_DEFINITIONS)
  list(FILTER _qt_test_defs EXCLUDE REGEX "^QT_TESTCASE_(BUILD|SOURCE)DIR=")
  set_target_properties(Qt6::Test PROPERTIES INTERFACE_COMPILE_DEFINITIONS "${_qt_test_defs}")
endif()

# CTest's slots are half-cores: scripts/test.sh, asan.sh and fuzz.sh run `ctest -j` with two
# slots per core (`ctest -j4` on 2 cores). A test holds two slots for each core it keeps busy
# (PROCESSORS n: n cores, default 1), and one when it mostly WAITS (on a server, a daemon, a
# child's timeout or a sleep; docs/build-and-tests.md says how that was measured). So tests that
# compute never ask the cores for more than they have, and tests that wait no longer hold a core
# each: with a slot per core, the suite kept this 2-core machine about three quarters idle.

# shardscope_add_test(NAME SOURCES... LIBS... LABELS... [PROCESSORS n] [WAITS] [TIMEOUT s] [XVFB]
#                     [DBUS] [FIXTURES_REQUIRED f...] [ENVIRONMENT k=v...] [DEPENDS target...])
# One Qt Test executable per tested unit, registered with CTest. Every test runs offscreen (XVFB:
# on a real X server, tests/ui/xvfb_run.sh, which fails when Xvfb is missing; DBUS: on a private
# session bus of its own, dbus-run-session, from scripts/setup.sh --tests) and
# single-threaded per process: OpenMP spinning makes oversubscribed ranks crawl on 2 cores. The
# GUI-thread guard (backend/guithread.h) is on in every test, as in debug builds.
# Paths reach the test at run time, in its environment, never as compile definitions (a clone's
# folder compiled in makes every clone compile its own unit, and ccache cannot share it): the
# checkout and the build tree in SHARDSCOPE_TEST_SOURCE_DIR and SHARDSCOPE_TEST_BINARY_DIR, and a
# program the test runs through ENVIRONMENT (SHARDSCOPE_TEST_CLI=$<TARGET_FILE:shardscope-cli>).
# The test reads them with tests/support/paths.h, which fails naming a variable that is missing.
function(shardscope_add_test name)
  cmake_parse_arguments(T "XVFB;DBUS;WAITS" "PROCESSORS;TIMEOUT"
                        "SOURCES;LIBS;LABELS;FIXTURES_REQUIRED;ENVIRONMENT;DEPENDS" ${ARGN})
  if(NOT T_LABELS)
    message(FATAL_ERROR "shardscope_add_test(${name}): give LABELS (unit, integration, gui, reference, slow, cuda-build)")
  endif()
  add_executable(${name} ${T_SOURCES})
  shardscope_layer(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/bin
                                           AUTOMOC ON)
  target_link_libraries(${name} PRIVATE Qt6::Test Qt6::Core ${T_LIBS})
  list(PREPEND T_ENVIRONMENT "SHARDSCOPE_TEST_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
                             "SHARDSCOPE_TEST_BINARY_DIR=${PROJECT_BINARY_DIR}")
  # shardscope_add_pg_test gives the test's _pg variant the same paths.
  set_property(TARGET ${name} PROPERTY SHARDSCOPE_TEST_ENVIRONMENT "${T_ENVIRONMENT}")
  if(T_DEPENDS)
    add_dependencies(${name} ${T_DEPENDS})
  endif()
  set(_bus)
  if(T_DBUS)
    set(_bus dbus-run-session --)
  endif()
  if(T_XVFB)
    add_test(NAME ${name}
             COMMAND ${_bus} ${PROJECT_SOURCE_DIR}/tests/ui/xvfb_run.sh $<TARGET_FILE:${name}>)
  elseif(T_DBUS)
    add_test(NAME ${name} COMMAND ${_bus} $<TARGET_FILE:${name}>)
  else()
    add_test(NAME ${name} COMMAND ${name})
  endif()
  _shardscope_test_properties(${name})
endfunction()

# shardscope_add_pg_test(TARGET [TIMEOUT s] [WAITS] [LABELS...]): TARGET (a test added above) once more as
# TARGET_pg, against a throwaway PostgreSQL server that tests/support/with_postgres.py starts on
# loopback and stops (SHARDSCOPE_TEST_DB names it; tests/support/teststore.h makes each test's
# database there). Labelled `postgres`; a server that cannot start fails the test. It gets the
# paths TARGET's test gets: SHARDSCOPE_TEST_SOURCE_DIR, SHARDSCOPE_TEST_BINARY_DIR and the
# test's ENVIRONMENT.
function(shardscope_add_pg_test target)
  cmake_parse_arguments(T "WAITS" "TIMEOUT" "LABELS;ARGS" ${ARGN})
  add_test(NAME ${target}_pg
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/support/with_postgres.py
                   $<TARGET_FILE:${target}> ${T_ARGS})
  set(timeout 300)
  if(T_TIMEOUT)
    set(timeout ${T_TIMEOUT})
  endif()
  get_target_property(environment ${target} SHARDSCOPE_TEST_ENVIRONMENT)
  shardscope_test_slots(slots 1 "${T_WAITS}")
  set_tests_properties(${target}_pg PROPERTIES LABELS "postgres;integration;${T_LABELS}"
                       PROCESSORS ${slots} TIMEOUT ${timeout} ENVIRONMENT "${environment}")
endfunction()

# shardscope_add_script_test(NAME COMMAND... LABELS... [...same options]): a test that runs a
# command (a Python or shell checker) rather than a Qt Test executable.
function(shardscope_add_script_test name)
  cmake_parse_arguments(T "WILL_FAIL;WAITS" "PROCESSORS;TIMEOUT;PASS_REGULAR_EXPRESSION"
                        "COMMAND;LABELS;FIXTURES_REQUIRED;ENVIRONMENT;DEPENDS" ${ARGN})
  add_test(NAME ${name} COMMAND ${T_COMMAND} WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  _shardscope_test_properties(${name})
  if(T_WILL_FAIL)
    set_tests_properties(${name} PROPERTIES WILL_FAIL ON)
  endif()
  if(T_PASS_REGULAR_EXPRESSION)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS_REGULAR_EXPRESSION}")
  endif()
endfunction()

# shardscope_add_test_tool(NAME SOURCES... LIBS...): a helper executable that script tests
# drive (the C++ side of a reference comparison), built into tests/bin.
function(shardscope_add_test_tool name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  shardscope_layer(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/bin)
  target_link_libraries(${name} PRIVATE ${T_LIBS})
endfunction()

# shardscope_reference_python(VAR MODULE...): VAR is the project's .venv Python when it imports
# every MODULE (scripts/setup.sh --tests installs the pinned references). Otherwise VAR is a
# command that fails naming the missing modules and the fix (tests/support/missing_modules.py),
# so a reference test never silently disappears: it is registered and fails.
function(shardscope_reference_python var)
  set(py "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  set(missing "")
  foreach(module ${ARGN})
    set(rc 1)
    if(EXISTS "${py}")
      execute_process(COMMAND "${py}" -c "import ${module}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    endif()
    if(NOT rc EQUAL 0)
      list(APPEND missing ${module})
    endif()
  endforeach()
  if(NOT missing)
    set(${var} "${py}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH where "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}")
    list(JOIN missing "," names)
    message(STATUS "Shardscope: ${where}: reference tests will fail (.venv lacks ${missing}; "
                   "scripts/setup.sh --tests)")
    set(${var} "${Python3_EXECUTABLE};${PROJECT_SOURCE_DIR}/tests/support/missing_modules.py;${names}"
        PARENT_SCOPE)
  endif()
endfunction()

# shardscope_test_slots(VAR CORES WAITS): the CTest slots (PROCESSORS) of a test that keeps CORES
# cores busy, or that mostly waits when WAITS is true (see above).
function(shardscope_test_slots var cores waits)
  if(waits)
    set(${var} 1 PARENT_SCOPE)
  else()
    math(EXPR slots "2 * ${cores}")
    set(${var} ${slots} PARENT_SCOPE)
  endif()
endfunction()

macro(_shardscope_test_properties name)
  if(NOT T_PROCESSORS)
    set(T_PROCESSORS 1)
  endif()
  shardscope_test_slots(_slots ${T_PROCESSORS} "${T_WAITS}")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" PROCESSORS ${_slots}
    TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "QT_QPA_PLATFORM=offscreen;OMP_NUM_THREADS=1;MKL_NUM_THREADS=1;SHARDSCOPE_THREAD_CHECKS=1;${T_ENVIRONMENT}")
  if(T_FIXTURES_REQUIRED)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${T_FIXTURES_REQUIRED}")
  endif()
  # The Slurm fixture is one node with few CPUs: its tests take turns, so none waits in the
  # queue behind another test's jobs.
  if("slurm" IN_LIST T_FIXTURES_REQUIRED)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK slurm)
  endif()
endmacro()
