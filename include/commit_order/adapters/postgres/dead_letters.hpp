// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/dead_letters.hpp — a dead-letter sink in a PostgreSQL table.
//
// Where `dead_letter<N>` puts the records it gives up on, durable before the position passes
// them: one row per letter, written by one INSERT in its own transaction, durable on return as
// the durability mode says (Synced under the default `synced`, checked with the server at
// every connect, as for the sinks). A letter keeps the record's key and value bytes, as a
// `Letter` format gives them, and the reason:
//
//   CREATE TABLE commit_order_dead_letters (stream TEXT, source_partition INTEGER,
//     source_offset BIGINT, reason TEXT NOT NULL, key BYTEA, value BYTEA,
//     written_at TIMESTAMPTZ NOT NULL DEFAULT now(),
//     PRIMARY KEY (stream, source_partition, source_offset))
//
// A letter is keyed by its record: a replay that gives up on the same record again (after a
// crash between the letter and the unit's commit) adds nothing. A row already there for those
// coordinates with other bytes is another record's -- two consumers sharing a stream name, or
// a topic recreated under its name -- and is refused (`letter_conflict`), never overwritten
// nor silently kept in place of this one. So the stream has no default: name the consumer.
//
// A `Letter` format is a type with
//   static std::optional<std::vector<std::byte>> key(const Event&);    // none: NULL
//   static std::optional<std::vector<std::byte>> value(const Event&);  // none: NULL
// (kafka::letter_bytes<Codec> is the one for Kafka's decoded events.)
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/position_table.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/detail/concat.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::postgres {

/// L gives the key and value bytes a dead letter of an Event keeps (commit_order::letter_format).
template <class L, class Event>
concept letter_format = commit_order::letter_format<L, Event>;

namespace detail {
/// The Letter dead_letters stands on once PG8 refused the one it was given: it declares what a
/// Letter has and defines none of it, so that the check's message is the one error. Only a
/// program that already failed to compile names it.
struct refused_letter final {
  template <class Event>
  static std::optional<std::vector<std::byte>> key(const Event& e);
  template <class Event>
  static std::optional<std::vector<std::byte>> value(const Event& e);
};
}  // namespace detail

struct dead_letter_options final {
  /// The consumer whose letters these are (required: two consumers sharing a name would share
  /// letters' coordinates).
  std::string stream;
  std::string table = "commit_order_dead_letters";
  /// The schema of the table (empty: the server's search_path); created if missing.
  std::string schema;
  bool create_tables = true;
  std::chrono::milliseconds lock_timeout{10000};
  std::chrono::seconds connect_timeout{10};
};

/// A letter is already kept at these coordinates, for another record.
class letter_conflict final : public error {
 public:
  letter_conflict(const std::string& stream, partition_id k, offset o)
      : error(commit_order::detail::concat(
            "commit_order::postgres: a dead letter of stream '", stream,
            "' is kept already for "
            "offset ",
            std::to_string(o.value()), " of partition ", std::to_string(k.value()),
            ", with another record's bytes -- two consumers share the stream name, or the topic "
            "was recreated; give each consumer (and each topic's life) its own stream")) {}
};

template <class Event, class Letter, durability_mode Durability = synced>
class dead_letters final {
  static_assert(
      part_rules::require<part_rules::postgres_letter_format, letter_format<Letter, Event>>());
  using letter_type =
      std::conditional_t<letter_format<Letter, Event>, Letter, detail::refused_letter>;

 public:
  using capabilities = commit_order::capabilities<typename Durability::durability>;

  /// Connects, checks the server gives the durability mode (durability_mismatch otherwise) and
  /// creates the table when asked. Throws std::invalid_argument for an empty stream or a table
  /// name that is not a plain identifier.
  dead_letters(std::string conninfo, dead_letter_options options)
      : db_(connection::open<Durability>(connection_options{
            std::move(conninfo), options.schema, options.create_tables, options.lock_timeout,
            std::chrono::milliseconds{0}, options.connect_timeout}))
      , options_(std::move(options)) {
    if (options_.stream.empty())
      throw std::invalid_argument(
          "commit_order::postgres::dead_letters: name the stream (dead_letter_options::stream): "
          "letters are kept by stream, partition and offset");
    const std::string t = detail::require_identifier(options_.table, "dead-letter table");
    if (options_.create_tables)
      (void)db_.exec(commit_order::detail::concat(
          "CREATE TABLE IF NOT EXISTS ", t,
          " (stream TEXT NOT NULL, source_partition INTEGER NOT NULL, source_offset BIGINT NOT "
          "NULL, reason TEXT NOT NULL, key BYTEA, value BYTEA, written_at TIMESTAMPTZ NOT NULL "
          "DEFAULT now(), PRIMARY KEY (stream, source_partition, source_offset))"));
    db_.prepare("commit_order_letter_put",
                commit_order::detail::concat(
                    "INSERT INTO ", t,
                    " (stream, source_partition, source_offset, reason, key, value) VALUES ($1, "
                    "$2, $3, $4, $5, $6) ON CONFLICT (stream, source_partition, source_offset) "
                    "DO NOTHING"));
    db_.prepare("commit_order_letter_same",
                commit_order::detail::concat(
                    "SELECT 1 FROM ", t,
                    " WHERE stream = $1 AND source_partition = $2 AND source_offset = $3 AND key "
                    "IS NOT DISTINCT FROM $4::bytea AND value IS NOT DISTINCT FROM $5::bytea"));
  }

  dead_letters(const dead_letters&) = delete;
  dead_letters& operator=(const dead_letters&) = delete;

  /// Keeps the letter of the record at offset `o` of partition `k`; durable on return. A letter
  /// of the same record kept already is left as it is (counted in repeats()); one of another
  /// record at those coordinates is letter_conflict. A failure of the server is an
  /// infrastructure_error: the position does not pass the record.
  void put(partition_id k, offset o, const Event& e, const char* reason) {
    std::string part, at;
    detail::append_integer(part, k.value());
    detail::append_integer(at, o.value());
    const std::optional<std::string> key = hex(letter_type::key(e));
    const std::optional<std::string> value = hex(letter_type::value(e));
    const std::string why = text(reason);
    const char* values[] = {options_.stream.c_str(),
                            part.c_str(),
                            at.c_str(),
                            why.c_str(),
                            key ? key->c_str() : nullptr,
                            value ? value->c_str() : nullptr};
    db_.ensure();
    if (db_.exec_prepared("commit_order_letter_put", 6, values).affected() == 1) {
      ++letters_;
      return;
    }
    const char* same[] = {values[0], values[1], values[2], values[4], values[5]};
    if (db_.exec_prepared("commit_order_letter_same", 5, same).rows() != 1)
      throw letter_conflict(options_.stream, k, o);
    ++repeats_;
  }

  /// Letters written by this object, and letters offered again for a record that had one.
  [[nodiscard]] std::size_t letters() const noexcept { return letters_; }
  [[nodiscard]] std::size_t repeats() const noexcept { return repeats_; }
  [[nodiscard]] connection& database() noexcept { return db_; }

 private:
  // The reason as valid UTF-8 (a TEXT column refuses anything else, and a reason may quote the
  // bytes of the message it is about): a byte that does not belong to a well-formed sequence
  // becomes "\xNN".
  static std::string text(const char* reason) {
    const std::string_view in = reason != nullptr ? reason : "";
    std::string out;
    out.reserve(in.size());
    std::size_t i = 0;
    while (i < in.size()) {
      const auto c = static_cast<unsigned char>(in[i]);
      const std::size_t n = c < 0x80           ? 1
                            : (c >> 5) == 0x6  ? 2
                            : (c >> 4) == 0xe  ? 3
                            : (c >> 3) == 0x1e ? 4
                                               : 0;
      bool ok = n != 0 && i + n <= in.size();
      for (std::size_t j = 1; ok && j < n; ++j)
        ok = (static_cast<unsigned char>(in[i + j]) & 0xc0) == 0x80;
      if (ok && n > 1) {
        // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
        std::uint32_t cp = c & (0xffU >> (n + 1));
        for (std::size_t j = 1; j < n; ++j)
          cp = (cp << 6) | (static_cast<unsigned char>(in[i + j]) & 0x3fU);
        static constexpr std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
        ok = cp >= least[n] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
      }
      if (ok) {
        out.append(in.substr(i, n));
        i += n;
      } else {
        static constexpr char digits[] = "0123456789abcdef";
        out += "\\x";
        out += digits[c >> 4];
        out += digits[c & 0xf];
        ++i;
      }
    }
    return out;
  }

  // bytea's hex input form: "\x" and two hex digits a byte.
  static std::optional<std::string> hex(const std::optional<std::vector<std::byte>>& b) {
    if (!b)
      return std::nullopt;
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(2 + 2 * b->size());
    s += "\\x";
    for (const std::byte c : *b) {
      s += digits[std::to_integer<unsigned>(c) >> 4];
      s += digits[std::to_integer<unsigned>(c) & 0xf];
    }
    return s;
  }

  connection db_;
  dead_letter_options options_;
  std::size_t letters_ = 0;
  std::size_t repeats_ = 0;
};

}  // namespace commit_order::postgres
