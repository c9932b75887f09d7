// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/table_sql.hpp — the SQL of a sink's data table, from its
// description D and write mode Mode: the table and its index, the write (one statement for any
// number of rows, one array parameter per column), the moved-key check and the watermark read.
// Text only: sink.hpp prepares and sends them.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "commit_order/adapters/detail/write_modes.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/adapters/postgres/text.hpp"

namespace commit_order::postgres::detail {

template <class D, class Mode>
struct table_sql final {
  using cols = columns_of<typename D::keys, typename D::values>;

  static std::string create() {
    const std::string t = quote_identifier(D::name);
    std::string sql = concat("CREATE TABLE IF NOT EXISTS ", t, " (", cols::definitions(), ", ",
                             quote_identifier(D::partition_column), " INTEGER NOT NULL, ",
                             quote_identifier(D::offset_column), " BIGINT NOT NULL");
    if constexpr (Mode::keyed)
      sql.append(concat(", PRIMARY KEY (", cols::key_names(), ")"));
    // The recovery check and the watermark read the highest offset of one partition.
    sql.append(concat("); CREATE INDEX IF NOT EXISTS ",
                      quote_identifier(concat(D::name, "_by_source")), " ON ", t, " (",
                      quote_identifier(D::partition_column), ", ",
                      quote_identifier(D::offset_column), ")"));
    return sql;
  }

  static std::string write() {
    const std::string partition = quote_identifier(D::partition_column);
    const std::string offset = quote_identifier(D::offset_column);
    std::string sql = concat("INSERT INTO ", quote_identifier(D::name), " AS t (",
                             cols::all_names(), ", ", partition, ", ", offset,
                             ") SELECT * FROM unnest(", cols::array_parameters(1), ", $");
    append_integer(sql, cols::count + 1);
    sql.append("::integer[], $");
    append_integer(sql, cols::count + 2);
    sql.append("::bigint[])");
    if constexpr (Mode::keyed) {
      const std::string updates = cols::updates();
      sql.append(concat(" ON CONFLICT (", cols::key_names(), ") DO UPDATE SET ", updates,
                        updates.empty() ? "" : ", ", partition, " = excluded.", partition, ", ",
                        offset, " = excluded.", offset));
      if constexpr (Mode::guard == adapters::guard_kind::offset) {
        sql.append(concat(" WHERE t.", partition, " = excluded.", partition, " AND t.", offset,
                          " < excluded.", offset));
      } else if constexpr (Mode::guard == adapters::guard_kind::version) {
        const std::string version = quote_identifier(version_column());
        sql.append(concat(" WHERE t.", version, " < excluded.", version));
      }
      // The rows that changed: a row missing here was kept out by the guard.
      if constexpr (Mode::guard != adapters::guard_kind::none)
        sql.append(concat(" RETURNING ", partition, ", ", offset));
    }
    return sql;
  }

  /// Of the given keys, each with the partition its row came from, those whose stored row
  /// came from another partition (the first by position in the arrays).
  static std::string moved() {
    const std::string partition = quote_identifier(D::partition_column);
    std::string sql =
        concat("SELECT u.n, t.", partition, ", t.", quote_identifier(D::offset_column),
               " FROM unnest(", cols::key_array_parameters(1), ", $");
    append_integer(sql, cols::key_count + 1);
    sql.append(concat("::integer[]) WITH ORDINALITY AS u(", cols::key_names(), ", p, n) JOIN ",
                      quote_identifier(D::name), " AS t ON ", cols::key_join("t", "u"), " WHERE t.",
                      partition, " <> u.p ORDER BY u.n LIMIT 1"));
    return sql;
  }

  static std::string watermark() {
    return concat("SELECT MAX(", quote_identifier(D::offset_column), ") FROM ",
                  quote_identifier(D::name), " WHERE ", quote_identifier(D::partition_column),
                  " = $1");
  }

  static constexpr std::string_view version_column() {
    if constexpr (Mode::guard == adapters::guard_kind::version) {
      return version_column_of<typename D::values>();
    } else {
      return {};
    }
  }

 private:
  template <class Values>
  static constexpr std::string_view version_column_of() {
    return version_name<Values>::get();
  }
  template <class Values>
  struct version_name;
  template <class... V>
  struct version_name<value_columns<V...>> {
    static constexpr std::string_view get() {
      std::string_view name;
      (
          [&] {
            if constexpr (std::is_same_v<decltype(V::member), decltype(Mode::member)>) {
              if (V::member == Mode::member)
                name = V::name;
            }
          }(),
          ...);
      return name;
    }
  };
};

template <class Mode, class Event>
constexpr bool version_fits() {
  if constexpr (Mode::guard == adapters::guard_kind::version) {
    using member_t = std::remove_cv_t<decltype(Mode::member)>;
    if constexpr (std::is_member_object_pointer_v<member_t>) {
      return std::is_same_v<typename member_pointer_traits<member_t>::owner, Event>;
    } else {
      return false;
    }
  } else {
    return true;
  }
}

}  // namespace commit_order::postgres::detail
