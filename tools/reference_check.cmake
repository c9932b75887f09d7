# SPDX-License-Identifier: BSL-1.0
# reference_check.cmake -- does docs/reference.md show what the headers declare?
# Extracts every ```cpp block of the page into one translation unit (tools/reference_blocks.cpp)
# and compiles it with the compile-fail tests' flags (-Werror included); the compiler's errors
# name lines of the page itself.
#   cmake -DGENERATOR=<reference_blocks> -DDOC=<reference.md> -DOUTPUT=<file.cpp> -DCXX=<compiler>
#         -DINCLUDE_DIRS=<dirs> [-DSYSTEM_INCLUDE_DIRS=<dirs>] -P reference_check.cmake
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../tests/compile_fail/compile_check.cmake")

foreach(var IN ITEMS GENERATOR DOC OUTPUT CXX INCLUDE_DIRS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "reference_check.cmake: -D${var}=... is required")
  endif()
endforeach()

execute_process(COMMAND "${GENERATOR}" "${DOC}" "${OUTPUT}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE said ERROR_VARIABLE said)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "reference_check: extracting the code of ${DOC} failed:\n${said}")
endif()
commit_order_compile(
  run
  COMPILER "${CXX}"
  SOURCE "${OUTPUT}"
  INCLUDE_DIRS ${INCLUDE_DIRS}
  SYSTEM_INCLUDE_DIRS ${SYSTEM_INCLUDE_DIRS})
if(NOT run_RESULT EQUAL 0)
  message(NOTICE "${run_OUTPUT}")
  message(FATAL_ERROR
    "reference_check: ${DOC} shows code that does not compile against the headers (the errors "
    "above name the page's lines): correct the page, or the header that changed what it shows.\n"
    "${run_COMMAND}")
endif()
string(STRIP "${said}" said)
message(STATUS "${said}: they compile against the headers")
