# SPDX-License-Identifier: BSL-1.0
# Adapter targets: header-only like the core, each linking its client library only when a
# consumer links the adapter target. An adapter whose client is not installed is skipped, and
# then neither exported nor demanded by the package config.
set(COMMIT_ORDER_INSTALLED_ADAPTERS "")
# Working on commit_order itself, the embedded adapters are required: their tests, the crash
# lab and the integration suite must run, never be skipped. As a dependency they are optional.
if(COMMIT_ORDER_BUILD_TESTING OR COMMIT_ORDER_BUILD_EXAMPLES)
  set(commit_order_adapter_mode REQUIRED)
else()
  set(commit_order_adapter_mode QUIET)
endif()
set(COMMIT_ORDER_ADAPTER_DEPENDENCIES "")

# commit_order_adapter(<name> PACKAGE <find_package name> LINK <imported target> WHAT <text>)
# Defines commit_order::<name> (exported as <name>) linking the client library, when its
# package is found; records it for install() and the package config's find_dependency().
function(commit_order_adapter name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PACKAGE;LINK;WHAT" "")
  find_package(${arg_PACKAGE} ${commit_order_adapter_mode})
  if(NOT ${arg_PACKAGE}_FOUND)
    message(STATUS "commit_order: ${arg_PACKAGE} not found, ${arg_WHAT} is not built")
    return()
  endif()
  add_library(commit_order_${name} INTERFACE)
  add_library(commit_order::${name} ALIAS commit_order_${name})
  set_target_properties(commit_order_${name} PROPERTIES EXPORT_NAME ${name})
  target_link_libraries(commit_order_${name} INTERFACE commit_order ${arg_LINK})
  set(COMMIT_ORDER_INSTALLED_ADAPTERS ${COMMIT_ORDER_INSTALLED_ADAPTERS} commit_order_${name}
      PARENT_SCOPE)
  set(COMMIT_ORDER_ADAPTER_DEPENDENCIES
      "${COMMIT_ORDER_ADAPTER_DEPENDENCIES}find_dependency(${arg_PACKAGE})\n" PARENT_SCOPE)
endfunction()

# commit_order::file — the segmented file log and the position file. zlib supplies CRC-32.
commit_order_adapter(file PACKAGE ZLIB LINK ZLIB::ZLIB WHAT "the file adapter")
# commit_order::sqlite — the SQLite sinks and position store.
commit_order_adapter(sqlite PACKAGE SQLite3 LINK SQLite::SQLite3 WHAT "the SQLite adapter")

# commit_order::json — the JSON codec (json.hpp), on nlohmann/json (header-only).
commit_order_adapter(json PACKAGE nlohmann_json LINK nlohmann_json::nlohmann_json
                     WHAT "the JSON codec")

# commit_order::kafka — the Kafka sources and the committed-offset position store, on
# librdkafka (Debian ships no CMake config for it: pkg-config finds it).
find_package(PkgConfig ${commit_order_adapter_mode})
if(PkgConfig_FOUND)
  pkg_check_modules(RDK ${commit_order_adapter_mode} IMPORTED_TARGET rdkafka>=2.0.2)
endif()
if(RDK_FOUND)
  add_library(commit_order_kafka INTERFACE)
  add_library(commit_order::kafka ALIAS commit_order_kafka)
  set_target_properties(commit_order_kafka PROPERTIES EXPORT_NAME kafka)
  target_link_libraries(commit_order_kafka INTERFACE commit_order PkgConfig::RDK)
  list(APPEND COMMIT_ORDER_INSTALLED_ADAPTERS commit_order_kafka)
  # The exported target names PkgConfig::RDK: a consumer recreates it the same way.
  string(APPEND COMMIT_ORDER_ADAPTER_DEPENDENCIES
         "find_dependency(PkgConfig)\npkg_check_modules(RDK REQUIRED IMPORTED_TARGET rdkafka>=2.0.2)\n")
else()
  message(STATUS "commit_order: librdkafka not found, the Kafka adapter is not built")
endif()

# commit_order::postgres — the PostgreSQL sinks and position store, on libpq.
find_package(PostgreSQL ${commit_order_adapter_mode})
if(PostgreSQL_FOUND)
  add_library(commit_order_postgres INTERFACE)
  add_library(commit_order::postgres ALIAS commit_order_postgres)
  set_target_properties(commit_order_postgres PROPERTIES EXPORT_NAME postgres)
  target_link_libraries(commit_order_postgres INTERFACE commit_order PostgreSQL::PostgreSQL)
  list(APPEND COMMIT_ORDER_INSTALLED_ADAPTERS commit_order_postgres)
  string(APPEND COMMIT_ORDER_ADAPTER_DEPENDENCIES "find_dependency(PostgreSQL)\n")
else()
  message(STATUS "commit_order: libpq (PostgreSQL) not found, the PostgreSQL adapter is not built")
endif()
