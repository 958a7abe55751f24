# flotilla_add_test(): one GoogleTest executable, registered with ctest per test case.
# Shared by tests/CMakeLists.txt and the worker-only GPU build (worker/gpu-check/), so both
# give tests the same links, FLOTILLA_SOURCE_DIR/FLOTILLA_BINARY_DIR/FLOTILLA_TOOLS_DIR and timeouts.
# Assumes: GTest and Threads found, targets flotilla::common and flotilla_warnings exist.
include(GoogleTest)

# flotilla_add_test(NAME name SOURCES a.cpp b.cpp LIBS flotilla::planner [LABELS slow] [TIMEOUT s] [SERIAL]
#                   [ONE_PROCESS])
function(flotilla_add_test)
  cmake_parse_arguments(T "SERIAL;ONE_PROCESS" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} flotilla::common flotilla_warnings
                        GTest::gtest GTest::gtest_main GTest::gmock Threads::Threads)
  target_compile_definitions(${T_NAME} PRIVATE
    FLOTILLA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" FLOTILLA_BINARY_DIR="${PROJECT_BINARY_DIR}"
    FLOTILLA_TOOLS_DIR="${FLOTILLA_TOOLS_DIR}")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set(props TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    list(APPEND props LABELS "${T_LABELS}")
  endif()
  # SERIAL: heavy end-to-end tests (many processes) run alone, so they neither starve nor are
  # starved by timing-sensitive tests on a 2-core machine.
  if(T_SERIAL)
    list(APPEND props RUN_SERIAL TRUE)
  endif()
  # ONE_PROCESS: the cases share an expensive set-up (SetUpTestSuite), so the executable is one
  # ctest test instead of one process per case; a skipped case shows the test as skipped.
  if(T_ONE_PROCESS)
    add_test(NAME ${T_NAME} COMMAND ${T_NAME})
    set_tests_properties(${T_NAME} PROPERTIES ${props} SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  else()
    gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
  endif()
endfunction()
