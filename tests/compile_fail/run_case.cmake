# SPDX-License-Identifier: BSL-1.0
# run_case.cmake -- the compile-fail driver. Compiles one case file and checks the outcome.
#
#   cmake -DCXX=<compiler> -DSOURCE=<case.cpp> -DMODE=fail -DEXPECT=<regex>
#         -DINCLUDE_DIRS=<dirs> [-DSYSTEM_INCLUDE_DIRS=<dirs>] -P run_case.cmake
#
# MODE=fail     compiles with COMMIT_ORDER_COMPILE_FAIL defined. Passes only when the compile
#               fails with exactly one error (the rules' ladder promises one), and that error
#               is a failed static_assert whose message matches EXPECT.
# MODE=compile  compiles without it: the case's twin, the nearest legal configuration. Passes
#               only when it compiles cleanly, which shows that the rule -- not some other
#               mistake in the file -- is what fails in fail mode.
# On failure it prints what it expected, what it got, the command and the compiler output.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/compile_check.cmake")

foreach(var IN ITEMS CXX SOURCE MODE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_case.cmake: -D${var}=... is required")
  endif()
endforeach()
if(MODE STREQUAL "fail")
  if(NOT DEFINED EXPECT OR EXPECT STREQUAL "")
    message(FATAL_ERROR "run_case.cmake: MODE=fail needs -DEXPECT=<message regex>")
  endif()
  set(fail_mode FAIL_MODE)
elseif(MODE STREQUAL "compile")
  set(fail_mode "")
else()
  message(FATAL_ERROR "run_case.cmake: MODE must be 'fail' or 'compile', not '${MODE}'")
endif()

commit_order_compile(
  run
  COMPILER "${CXX}"
  SOURCE "${SOURCE}"
  ${fail_mode}
  INCLUDE_DIRS ${INCLUDE_DIRS}
  SYSTEM_INCLUDE_DIRS ${SYSTEM_INCLUDE_DIRS})
commit_order_read_diagnostics(got OUTPUT "${run_OUTPUT}" EXPECT "${EXPECT}")

set(summary "exit code ${run_RESULT}, ${got_ERRORS} error(s), ${got_LINES} line(s) of output")
set(problems "")
if(MODE STREQUAL "fail")
  if(run_RESULT EQUAL 0)
    list(APPEND problems "it compiled: the illegal configuration must not")
  endif()
  if(NOT got_ERRORS EQUAL 1)
    list(APPEND problems "${got_ERRORS} errors: a misuse must give exactly one")
  endif()
  if(got_MESSAGE_AT EQUAL 0)
    list(APPEND problems "no error line is a failed static_assert matching: ${EXPECT}")
  endif()
else()
  if(NOT run_RESULT EQUAL 0)
    list(APPEND problems "the twin (the legal configuration) does not compile")
  endif()
  if(NOT run_OUTPUT STREQUAL "")
    list(APPEND problems "the twin compiles with diagnostics: it must compile cleanly")
  endif()
endif()

cmake_path(GET SOURCE FILENAME case_file)
if(problems)
  list(JOIN problems "\n  - " reasons)
  # message(NOTICE) prints verbatim; FATAL_ERROR would re-wrap the compiler's lines.
  message(NOTICE
    "compile_fail: ${case_file} (${MODE} mode) FAILED\n"
    "  - ${reasons}\n"
    "got: ${summary}\n"
    "command: ${run_COMMAND}\n"
    "---- compiler output ----\n${run_OUTPUT}---- end of compiler output ----")
  message(FATAL_ERROR "compile_fail: ${case_file} (${MODE} mode) FAILED")
endif()
if(MODE STREQUAL "fail")
  message(STATUS "compile_fail: ${case_file} fails as expected: ${summary}, "
                 "message on line ${got_MESSAGE_AT}")
else()
  message(STATUS "compile_fail: ${case_file} compiles (twin)")
endif()
