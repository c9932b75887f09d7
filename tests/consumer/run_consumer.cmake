# SPDX-License-Identifier: BSL-1.0
# run_consumer.cmake -- builds and runs a downstream project against commit_order.
#
#   cmake -DMODE=find_package|add_subdirectory -DSOURCE_DIR=<commit_order source tree>
#         -DWORK_DIR=<scratch dir, wiped> -DGENERATOR=<generator> [-DMAKE_PROGRAM=<path>]
#         -DCXX=<compiler> [-DCXX_FLAGS=<flags>] [-DBUILD_TYPE=<type>] -P run_consumer.cmake
#
# find_package:     configures a fresh build of SOURCE_DIR (tests, examples and benchmarks
#                   off), installs it into WORK_DIR/prefix, then builds find_package/ against
#                   that prefix only, and runs it.
# add_subdirectory: builds add_subdirectory/, which adds SOURCE_DIR as a subproject and
#                   checks that none of commit_order's tests or examples come with it; runs it
#                   and checks that its ctest holds its own test only.
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS MODE SOURCE_DIR WORK_DIR GENERATOR CXX)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

# The same toolchain as the enclosing build; nothing found through the user's package
# registry, so only the prefix given can satisfy find_package.
set(toolchain -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
              "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
  list(APPEND toolchain "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()

function(step what)
  message(STATUS "consumer (${MODE}): ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmdline)
    message(NOTICE "${out}")
    message(FATAL_ERROR "consumer (${MODE}): ${what} failed (${rc}): ${cmdline}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(here "${CMAKE_CURRENT_LIST_DIR}")
set(consumer_build "${WORK_DIR}/consumer")

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  step("configure commit_order" ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/producer"
       ${toolchain} "-DCMAKE_INSTALL_PREFIX=${prefix}" -DCOMMIT_ORDER_BUILD_TESTING=OFF
       -DCOMMIT_ORDER_BUILD_EXAMPLES=OFF -DCOMMIT_ORDER_BUILD_BENCHMARKS=OFF)
  step("build commit_order" ${CMAKE_COMMAND} --build "${WORK_DIR}/producer")
  step("install commit_order" ${CMAKE_COMMAND} --install "${WORK_DIR}/producer")
  foreach(installed IN ITEMS include/commit_order/commit_order.hpp
                             include/commit_order/adapters/memory.hpp)
    if(NOT EXISTS "${prefix}/${installed}")
      message(FATAL_ERROR "consumer (${MODE}): ${installed} was not installed")
    endif()
  endforeach()
  step("configure the consumer" ${CMAKE_COMMAND} -S "${here}/find_package" -B "${consumer_build}"
       ${toolchain} "-DCMAKE_PREFIX_PATH=${prefix}")
  # The package must come from the prefix just installed, not from anywhere else.
  string(FIND "${step_output}" "from ${prefix}/" found_at)
  if(found_at EQUAL -1)
    message(NOTICE "${step_output}")
    message(FATAL_ERROR "consumer (${MODE}): commit_order was not found in ${prefix}")
  endif()
elseif(MODE STREQUAL "add_subdirectory")
  step("configure the consumer" ${CMAKE_COMMAND} -S "${here}/add_subdirectory"
       -B "${consumer_build}" ${toolchain} "-DCOMMIT_ORDER_SOURCE_DIR=${SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: MODE must be find_package or add_subdirectory")
endif()

step("build the consumer" ${CMAKE_COMMAND} --build "${consumer_build}")
if(MODE STREQUAL "add_subdirectory" AND EXISTS "${consumer_build}/commit_order/tests")
  message(FATAL_ERROR "consumer (${MODE}): commit_order's tests were configured")
endif()
step("list the consumer's tests" ${CMAKE_CTEST_COMMAND} --test-dir "${consumer_build}" -N)
if(NOT step_output MATCHES "Total Tests: 1\n")
  message(NOTICE "${step_output}")
  message(FATAL_ERROR "consumer (${MODE}): expected the consumer's own test only")
endif()
step("run the consumer" ${CMAKE_CTEST_COMMAND} --test-dir "${consumer_build}"
     --output-on-failure)
message(STATUS "consumer (${MODE}): passed")
