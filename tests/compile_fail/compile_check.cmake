# SPDX-License-Identifier: BSL-1.0
# compile_check.cmake -- compile one file with the project's flags and read what the compiler
# said. Shared by run_case.cmake (the compile-fail driver) and tools/measure_diagnostics.cmake,
# so the tests and the measured table see the same invocation and count the same way.
include_guard(GLOBAL)

# -fsyntax-only writes no object file, so any number of cases can compile at once (ctest -j).
# Colour and line wrapping are switched off so that a line of output is a line of output.
set(COMMIT_ORDER_CHECK_FLAGS
    -std=c++20
    -fsyntax-only
    -Wall
    -Wextra
    -Wpedantic
    -Werror
    -fdiagnostics-color=never
    -fmessage-length=0)

# commit_order_compile(<prefix> COMPILER <cxx> SOURCE <file> [FAIL_MODE]
#                      [INCLUDE_DIRS <dir>...] [SYSTEM_INCLUDE_DIRS <dir>...])
# FAIL_MODE defines COMMIT_ORDER_COMPILE_FAIL, which switches a case's illegal line on.
# Sets <prefix>_RESULT (exit code), <prefix>_OUTPUT (stdout and stderr, in the order written)
# and <prefix>_COMMAND (the command line, for a failure report).
function(commit_order_compile prefix)
  cmake_parse_arguments(PARSE_ARGV 1 arg "FAIL_MODE" "COMPILER;SOURCE"
                        "INCLUDE_DIRS;SYSTEM_INCLUDE_DIRS")
  if(NOT arg_COMPILER OR NOT arg_SOURCE)
    message(FATAL_ERROR "commit_order_compile: COMPILER and SOURCE are required")
  endif()
  if(NOT EXISTS "${arg_SOURCE}")
    message(FATAL_ERROR "commit_order_compile: no such file: ${arg_SOURCE}")
  endif()
  set(cmd "${arg_COMPILER}" ${COMMIT_ORDER_CHECK_FLAGS})
  if(arg_FAIL_MODE)
    list(APPEND cmd -DCOMMIT_ORDER_COMPILE_FAIL)
  endif()
  foreach(dir IN LISTS arg_INCLUDE_DIRS)
    list(APPEND cmd "-I${dir}")
  endforeach()
  foreach(dir IN LISTS arg_SYSTEM_INCLUDE_DIRS)
    list(APPEND cmd -isystem "${dir}")
  endforeach()
  list(APPEND cmd "${arg_SOURCE}")
  # Untranslated diagnostics whatever the machine's locale: the checks read "error:".
  set(ENV{LC_ALL} C)
  execute_process(
    COMMAND ${cmd}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE out)
  list(JOIN cmd " " cmdline)
  set(${prefix}_RESULT "${rc}" PARENT_SCOPE)
  set(${prefix}_OUTPUT "${out}" PARENT_SCOPE)
  set(${prefix}_COMMAND "${cmdline}" PARENT_SCOPE)
endfunction()

# commit_order_read_diagnostics(<prefix> OUTPUT <text> [EXPECT <regex>])
# Sets
#   <prefix>_LINES       lines of output;
#   <prefix>_ERRORS      lines that report an error (a compiler's "error:" line, not a note and
#                        not the echoed source, which can contain the message too);
#   <prefix>_MESSAGE_AT  the 1-based line of the first error line that is a failed
#                        static_assert carrying a message matching EXPECT (0: none).
# g++ 12 writes `error: static assertion failed: <msg>`; clang 14 writes
# `error: static_assert failed due to requirement '...' "<msg>"`.
function(commit_order_read_diagnostics prefix)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT;EXPECT" "")
  set(text "${arg_OUTPUT}")
  # One list element per line. Brackets and semicolons would make CMake's list splitting
  # merge lines, so they travel as placeholders and are restored line by line.
  string(REPLACE ";" "<co-semicolon>" text "${text}")
  string(REPLACE "[" "<co-lsqb>" text "${text}")
  string(REPLACE "]" "<co-rsqb>" text "${text}")
  string(REGEX REPLACE "\n$" "" text "${text}")
  set(lines 0)
  set(errors 0)
  set(message_at 0)
  if(NOT text STREQUAL "")
    string(REPLACE "\n" ";" text "${text}")
    foreach(line IN LISTS text)
      math(EXPR lines "${lines} + 1")
      string(REPLACE "<co-semicolon>" ";" line "${line}")
      string(REPLACE "<co-lsqb>" "[" line "${line}")
      string(REPLACE "<co-rsqb>" "]" line "${line}")
      if(line MATCHES "^(fatal )?error: " OR line MATCHES "^[^ \t].*: (fatal )?error: ")
        math(EXPR errors "${errors} + 1")
        if(message_at EQUAL 0
           AND DEFINED arg_EXPECT
           AND line MATCHES "error: (static assertion failed: |static_assert failed.*\")${arg_EXPECT}")
          set(message_at ${lines})
        endif()
      endif()
    endforeach()
  endif()
  set(${prefix}_LINES ${lines} PARENT_SCOPE)
  set(${prefix}_ERRORS ${errors} PARENT_SCOPE)
  set(${prefix}_MESSAGE_AT ${message_at} PARENT_SCOPE)
endfunction()
