# SPDX-License-Identifier: BSL-1.0
# Fails when a C++ file, CMake file or shell script of the tree does not carry the licence
# identifier (LICENSE: the Boost Software License 1.0) in its first two lines (the second for a
# script that starts with #!). A file added without it would be shipped without a licence.
#   cmake -DSOURCE_DIR=<repo> -P spdx_check.cmake
file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/include/*.hpp"
     "${SOURCE_DIR}/tests/*.hpp" "${SOURCE_DIR}/tests/*.cpp" "${SOURCE_DIR}/examples/*.hpp"
     "${SOURCE_DIR}/examples/*.cpp" "${SOURCE_DIR}/bench/*.hpp" "${SOURCE_DIR}/bench/*.cpp"
     "${SOURCE_DIR}/bench/*.sh" "${SOURCE_DIR}/tools/*.cpp" "${SOURCE_DIR}/tools/*.cmake"
     "${SOURCE_DIR}/cmake/*" "${SOURCE_DIR}/*CMakeLists.txt" "${SOURCE_DIR}/tests/*.cmake")
list(FILTER files EXCLUDE REGEX "^build")
list(APPEND files .ci/run tools/install-deps)
set(missing "")
foreach(f IN LISTS files)
  file(STRINGS "${SOURCE_DIR}/${f}" head LIMIT_COUNT 2)
  if(NOT head MATCHES "SPDX-License-Identifier: BSL-1\\.0")
    list(APPEND missing "${f}")
  endif()
endforeach()
list(LENGTH files count)
if(missing)
  list(JOIN missing "\n  " names)
  message(FATAL_ERROR
    "spdx_check: no `SPDX-License-Identifier: BSL-1.0` line at the top of:\n  ${names}\n"
    "Add `// SPDX-License-Identifier: BSL-1.0` (C++) or `# SPDX-License-Identifier: BSL-1.0` "
    "(CMake; after the #! line of a script) as the first line.")
endif()
message(STATUS "spdx_check: ${count} files carry the licence identifier")
