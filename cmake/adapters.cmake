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

# commit_order::file — the segmented file log and the position file. zlib supplies CRC-32.
find_package(ZLIB ${commit_order_adapter_mode})
if(ZLIB_FOUND)
  add_library(commit_order_file INTERFACE)
  add_library(commit_order::file ALIAS commit_order_file)
  set_target_properties(commit_order_file PROPERTIES EXPORT_NAME file)
  target_link_libraries(commit_order_file INTERFACE commit_order ZLIB::ZLIB)
  list(APPEND COMMIT_ORDER_INSTALLED_ADAPTERS commit_order_file)
  string(APPEND COMMIT_ORDER_ADAPTER_DEPENDENCIES "find_dependency(ZLIB)\n")
else()
  message(STATUS "commit_order: zlib not found, the file adapter is not built")
endif()

# commit_order::sqlite — the SQLite sinks and position store.
find_package(SQLite3 ${commit_order_adapter_mode})
if(SQLite3_FOUND)
  add_library(commit_order_sqlite INTERFACE)
  add_library(commit_order::sqlite ALIAS commit_order_sqlite)
  set_target_properties(commit_order_sqlite PROPERTIES EXPORT_NAME sqlite)
  target_link_libraries(commit_order_sqlite INTERFACE commit_order SQLite::SQLite3)
  list(APPEND COMMIT_ORDER_INSTALLED_ADAPTERS commit_order_sqlite)
  string(APPEND COMMIT_ORDER_ADAPTER_DEPENDENCIES "find_dependency(SQLite3)\n")
else()
  message(STATUS "commit_order: SQLite3 not found, the SQLite adapter is not built")
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
