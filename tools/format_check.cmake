# SPDX-License-Identifier: BSL-1.0
# Fails when a tracked C++ file is not formatted by the root .clang-format.
#   cmake -DSOURCE_DIR=<repo> -DCLANG_FORMAT=<clang-format> -P format_check.cmake
file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/include/*.hpp" "${SOURCE_DIR}/tests/*.hpp" "${SOURCE_DIR}/tests/*.cpp"
     "${SOURCE_DIR}/examples/*.hpp" "${SOURCE_DIR}/examples/*.cpp" "${SOURCE_DIR}/bench/*.hpp"
     "${SOURCE_DIR}/bench/*.cpp" "${SOURCE_DIR}/tools/*.cpp")
list(FILTER files EXCLUDE REGEX "^build")
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "format_check: no files found under ${SOURCE_DIR}")
endif()
execute_process(COMMAND "${CLANG_FORMAT}" --dry-run --Werror ${files}
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "format_check: files differ from .clang-format (run clang-format -i):\n${err}")
endif()
message(STATUS "format_check: ${count} files formatted")
