# SPDX-License-Identifier: BSL-1.0
# doc_references.cmake -- documents cite what the repository holds.
#   cmake -DSOURCE_DIR=<repo> -P doc_references.cmake
# Fails when
#  - a tracked text file cites a document the repository does not hold (the design notes and
#    essays the project started from live outside it);
#  - docs/architecture.md names a path (`dir/file`) that does not exist, or a name of the code
#    (`snake_case`) that no header under include/ defines or uses, or links a missing page.
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "doc_references.cmake: -DSOURCE_DIR=... is required")
endif()

file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/include/*" "${SOURCE_DIR}/tests/*" "${SOURCE_DIR}/examples/*"
     "${SOURCE_DIR}/bench/*" "${SOURCE_DIR}/tools/*" "${SOURCE_DIR}/docs/*.md"
     "${SOURCE_DIR}/README.md" "${SOURCE_DIR}/CMakeLists.txt")
list(FILTER files EXCLUDE REGEX "^build|\\.(png|svg|csv|json)$|doc_references\\.cmake$")
set(problems "")
foreach(f IN LISTS files)
  file(STRINGS "${SOURCE_DIR}/${f}" hits REGEX "DESIGN\\.md|DESIGN §|[Dd]esign essay|\\.\\./shared/")
  foreach(h IN LISTS hits)
    string(APPEND problems "  ${f}: cites a document outside the repository: ${h}\n")
  endforeach()
endforeach()

set(page "${SOURCE_DIR}/docs/architecture.md")
if(NOT EXISTS "${page}")
  message(FATAL_ERROR "doc_references: docs/architecture.md is missing")
endif()
file(READ "${page}" text)
file(GLOB_RECURSE headers "${SOURCE_DIR}/include/*.hpp")
set(code "")
foreach(h IN LISTS headers)
  file(READ "${h}" body)
  string(APPEND code "${body}")
endforeach()
string(REGEX MATCHALL "`[^`\n]+`" quoted "${text}")
set(paths 0)
set(names 0)
foreach(q IN LISTS quoted)
  string(REGEX REPLACE "^`(.*)`$" "\\1" q "${q}")
  if(q MATCHES "^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+/?$")
    math(EXPR paths "${paths} + 1")
    if(NOT EXISTS "${SOURCE_DIR}/${q}")
      string(APPEND problems "  docs/architecture.md: names ${q}, which does not exist\n")
    endif()
  elseif(q MATCHES "^[a-z]+(_[a-z]+)+$")
    math(EXPR names "${names} + 1")
    string(FIND "${code}" "${q}" at)
    if(at EQUAL -1)
      string(APPEND problems "  docs/architecture.md: names `${q}`, which no header under include/ has\n")
    endif()
  endif()
endforeach()
# Links: "(page.md)" (brackets would stop CMake from splitting the list).
string(REGEX MATCHALL "\\([A-Za-z0-9_./-]+\\.md\\)" links "${text}")
foreach(l IN LISTS links)
  string(REGEX REPLACE "^\\((.*)\\)$" "\\1" l "${l}")
  if(NOT EXISTS "${SOURCE_DIR}/docs/${l}")
    string(APPEND problems "  docs/architecture.md: links ${l}, which does not exist\n")
  endif()
endforeach()
if(paths LESS 20 OR names LESS 10)
  string(APPEND problems "  docs/architecture.md: only ${paths} paths and ${names} names found: is the check reading it?\n")
endif()
if(problems)
  message(FATAL_ERROR "doc_references:\n${problems}")
endif()
list(LENGTH files count)
message(STATUS "doc_references: ${count} files cite nothing outside the repository; "
               "docs/architecture.md: ${paths} paths and ${names} names exist")
