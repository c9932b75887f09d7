# SPDX-License-Identifier: BSL-1.0
# doc_check.cmake -- is a committed generated document up to date?
#
# As a module: commit_order_check_doc(<generated> <committed>) fails with a diff when the two
# differ. As a script, it first runs a generator that takes the output path as its argument:
#   cmake -DGENERATOR=<program> -DOUTPUT=<file> -DCOMMITTED=<file> -P doc_check.cmake
include_guard(GLOBAL)

function(commit_order_check_doc generated committed)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${generated}" "${committed}"
                  RESULT_VARIABLE differ)
  if(differ)
    find_program(diff_program diff)
    if(diff_program)
      execute_process(COMMAND "${diff_program}" -u "${committed}" "${generated}"
                      OUTPUT_VARIABLE delta ERROR_VARIABLE delta)
      message(NOTICE "${delta}")
    endif()
    cmake_path(GET committed FILENAME name)
    message(FATAL_ERROR
      "docs/${name} is stale: it differs from what the generator writes now (${generated}). "
      "Regenerate it with `cmake --build <build dir> --target docs` and commit the result.")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  foreach(var IN ITEMS GENERATOR OUTPUT COMMITTED)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "doc_check.cmake: -D${var}=... is required")
    endif()
  endforeach()
  execute_process(COMMAND "${GENERATOR}" "${OUTPUT}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "doc_check.cmake: ${GENERATOR} failed (${rc})")
  endif()
  commit_order_check_doc("${OUTPUT}" "${COMMITTED}")
endif()
