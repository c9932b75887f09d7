# SPDX-License-Identifier: BSL-1.0
# Checks that every README block marked `<!-- snippet: PATH ... -->` is the file PATH, verbatim:
# the README's code is the compiled, tested code, never a copy that drifted.
#   cmake -DSOURCE_DIR=<repo> -P readme_snippets.cmake
file(READ "${SOURCE_DIR}/README.md" readme)
string(REGEX MATCHALL "<!-- snippet: [^ ]+" markers "${readme}")
if(NOT markers)
  message(FATAL_ERROR "README.md has no snippet markers: nothing to check")
endif()
foreach(marker IN LISTS markers)
  string(REPLACE "<!-- snippet: " "" path "${marker}")
  file(READ "${SOURCE_DIR}/${path}" code)
  # The file's licence line is not part of what the README shows.
  string(REGEX REPLACE "^// SPDX-License-Identifier: [^\n]*\n" "" code "${code}")
  string(FIND "${readme}" "${marker}" at)
  string(SUBSTRING "${readme}" ${at} -1 rest)
  string(FIND "${rest}" "```cpp\n" open)
  math(EXPR open "${open} + 7")
  string(SUBSTRING "${rest}" ${open} -1 rest)
  string(FIND "${rest}" "```\n" close)
  string(SUBSTRING "${rest}" 0 ${close} block)
  if(NOT block STREQUAL code)
    message(FATAL_ERROR "README.md's snippet of ${path} differs from the file: copy the file into the README")
  endif()
  message(STATUS "README snippet ${path}: identical")
endforeach()
