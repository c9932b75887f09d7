# SPDX-License-Identifier: BSL-1.0
# rules_complete.cmake -- does every registered rule have a compile-fail case?
#
#   cmake -DLISTER=<legality_table> -DCASES=<tests/compile_fail/cases.cmake> -P rules_complete.cmake
#
# The registries (rules::all_rules and part_rules::all_part_rules, listed by `legality_table
# --ids`) are the one place a rule is written; its check in pipeline.hpp or part_checks.hpp is
# generated and its line in docs/legality.md too. What cannot be generated is the case that
# proves its diagnostic, so this test demands one for every id, and refuses a case whose id
# names no rule.
cmake_minimum_required(VERSION 3.25)
foreach(var IN ITEMS LISTER CASES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "rules_complete.cmake: -D${var}=... is required")
  endif()
endforeach()

execute_process(COMMAND "${LISTER}" --ids OUTPUT_VARIABLE ids_text RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rules_complete.cmake: ${LISTER} --ids failed (${rc})")
endif()
string(REPLACE "\n" ";" rule_ids "${ids_text}")
list(FILTER rule_ids EXCLUDE REGEX "^$")
set(duplicates "${rule_ids}")
list(REMOVE_DUPLICATES duplicates)
if(NOT duplicates STREQUAL rule_ids)
  message(FATAL_ERROR "rules_complete.cmake: two registered rules share an id: ${rule_ids}")
endif()

file(READ "${CASES}" cases_text)
string(REGEX MATCHALL "compile_fail_case\\([a-z0-9_]+[ \n]+[A-Za-z0-9]+" calls "${cases_text}")
set(case_ids "")
foreach(call IN LISTS calls)
  string(REGEX REPLACE "compile_fail_case\\([a-z0-9_]+[ \n]+" "" id "${call}")
  list(APPEND case_ids "${id}")
endforeach()

set(problems "")
foreach(id IN LISTS rule_ids)
  if(NOT id IN_LIST case_ids)
    string(APPEND problems "  rule ${id} has no compile-fail case in cases.cmake\n")
  endif()
endforeach()
# Cases whose message is not a rule's: the pipeline constructor's checks ("ctor"), the stand-in
# for a rejected pipeline ("surface"), and a header the configuration needs but did not include
# ("include": with_executor without <commit_order/executor.hpp>). A part's own check is a rule
# of part_rules, with an id of its own.
set(non_rule_ids ctor surface include)
foreach(id IN LISTS case_ids)
  if(NOT id IN_LIST rule_ids AND NOT id IN_LIST non_rule_ids)
    string(APPEND problems "  a case names ${id}, which is no registered rule\n")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "rules and compile-fail cases disagree:\n${problems}")
endif()
list(LENGTH rule_ids n_rules)
list(LENGTH case_ids n_cases)
message(STATUS "rules_complete: ${n_rules} rules, each with a case (${n_cases} cases)")
