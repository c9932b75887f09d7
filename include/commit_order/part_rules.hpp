// SPDX-License-Identifier: BSL-1.0
// commit_order/part_rules.hpp — every rule a part checks of itself, in one place.
//
// The pipeline's rules (rules.hpp) judge a whole configuration. These are the rules a part —
// a table layout, a codec, a Kafka source or store, a memory table, an option — checks of its
// own declaration when it is named or built, before any pipeline exists. Each is one named
// type with an id by family (CO core vocabulary, MM memory, FL file, SQ SQLite, PG
// PostgreSQL, KF Kafka, JS JSON), a one-line message that states the rule and the fix, and the
// failure it prevents. The predicate stays at the check site, which says
//
//   static_assert(part_rules::require<part_rules::sqlite_column_elsewhere, holds>());
//
// with `require` from part_checks.hpp: when `holds` is false, the one static_assert there that
// carries the rule's message fails.
//
// A rule is registered once, by adding its type to `all_part_rules`. C++20 needs a string
// literal in static_assert, so part_checks.hpp's block of assertions is generated from this
// list by tools/rule_checks.cpp (`cmake --build <dir> --target rule_checks`) and carries the
// list's fingerprint: a rule added or reworded without regenerating the block fails every check
// that is evaluated, naming that command. tools/rules_complete.cmake demands a compile-fail case
// for every id (tests/compile_fail/cases.cmake), and docs/legality.md lists them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace commit_order::part_rules {

// ---- CO: the core vocabulary ----------------------------------------------------------------

struct max_transaction_rows_zero final {
  static constexpr std::string_view id = "CO1";
  static constexpr std::string_view part = "MaxTransactionRows<N>";
  static constexpr std::string_view message =
      "commit_order CO1: MaxTransactionRows<N> needs N >= 1 -- a transaction of no rows would "
      "never move the position; leave the tag out for no limit";
  static constexpr std::string_view prevents = "a transaction limit no unit can meet";
};

struct retry_count_zero final {
  static constexpr std::string_view id = "CO2";
  static constexpr std::string_view part = "retry<N>, retry_world<N>";
  static constexpr std::string_view message =
      "commit_order CO2: retry<N> and retry_world<N> need N >= 1 -- use stop (the default) for "
      "no retries";
  static constexpr std::string_view prevents = "an error handling that says retry and never does";
};

// ---- MM: the in-memory parts ----------------------------------------------------------------

struct memory_idempotent_without_key final {
  static constexpr std::string_view id = "MM1";
  static constexpr std::string_view part = "memory::table";
  static constexpr std::string_view message =
      "commit_order MM1: an Idempotent memory::table needs a key -- name it, e.g. "
      "memory::table<Row, key<&Row::id>, capabilities<Idempotent, Volatile>>";
  static constexpr std::string_view prevents = "an upsert with nothing to upsert on";
};

struct memory_guard_without_upsert final {
  static constexpr std::string_view id = "MM2";
  static constexpr std::string_view part = "memory::table";
  static constexpr std::string_view message =
      "commit_order MM2: OffsetGuarded and VersionGuarded are conditions on a keyed upsert -- "
      "declare Idempotent, with a key, beside them";
  static constexpr std::string_view prevents = "a guard with no stored row to compare with";
};

struct memory_append_only_upsert final {
  static constexpr std::string_view id = "MM3";
  static constexpr std::string_view part = "memory::table";
  static constexpr std::string_view message =
      "commit_order MM3: an AppendOnly memory::table cannot upsert -- a log keeps every row it is "
      "given; drop Idempotent, the key and any guard, or drop AppendOnly";
  static constexpr std::string_view prevents = "a table that claims to append and replaces rows";
};

// ---- FL: the file log -----------------------------------------------------------------------

struct file_trivial_codec_event final {
  static constexpr std::string_view id = "FL1";
  static constexpr std::string_view part = "file::trivial_codec";
  static constexpr std::string_view message =
      "commit_order FL1: file::trivial_codec writes the event's bytes and the event is not "
      "trivially copyable (a std::string member is a pointer into this process) -- give "
      "file::log a codec with an explicit format";
  static constexpr std::string_view prevents = "addresses written to the log as if they were data";
};

struct file_codec_shape final {
  static constexpr std::string_view id = "FL2";
  static constexpr std::string_view part = "file::log";
  static constexpr std::string_view message =
      "commit_order FL2: the log's codec does not encode and decode its event -- it needs static "
      "void encode(const Event&, std::vector<std::byte>&) and static Event "
      "decode(std::span<const std::byte>)";
  static constexpr std::string_view prevents = "a log that cannot write or read its own records";
};

struct file_sync_policy final {
  static constexpr std::string_view id = "FL3";
  static constexpr std::string_view part = "file::log";
  static constexpr std::string_view message =
      "commit_order FL3: the log's Sync is not a sync policy -- use file::sync_each_append "
      "(Synced) or file::sync_on_flush (Buffered)";
  static constexpr std::string_view prevents = "a durability the log does not know how to give";
};

// ---- SQ: SQLite -----------------------------------------------------------------------------

struct sqlite_identifier final {
  static constexpr std::string_view id = "SQ1";
  static constexpr std::string_view part = "sqlite::column, sqlite::table_layout";
  static constexpr std::string_view message =
      "commit_order SQ1: a name in a SQLite table layout is not a plain identifier -- the table's "
      "and every column's name (source_offset and source_partition too) is "
      "[A-Za-z_][A-Za-z0-9_]*, at most 64 characters";
  static constexpr std::string_view prevents = "a name that changes a statement's meaning";
};

struct sqlite_empty_key final {
  static constexpr std::string_view id = "SQ2";
  static constexpr std::string_view part = "sqlite::table_layout";
  static constexpr std::string_view message =
      "commit_order SQ2: the table's key_columns<> is empty -- the upsert conflicts on the key: "
      "name at least one column, e.g. sqlite::key_columns<sqlite::column<\"id\", &Event::id>>";
  static constexpr std::string_view prevents = "an upsert with no key to conflict on";
};

struct sqlite_column_elsewhere final {
  static constexpr std::string_view id = "SQ3";
  static constexpr std::string_view part = "sqlite::table_layout";
  static constexpr std::string_view message =
      "commit_order SQ3: a column holds a member of another type than the table's event -- "
      "every sqlite::column<\"name\", &Event::member> of table_layout<\"table\", Event, ...> "
      "points into Event";
  static constexpr std::string_view prevents = "rows built from members the event does not have";
};

struct sqlite_duplicate_column final {
  static constexpr std::string_view id = "SQ4";
  static constexpr std::string_view part = "sqlite::table_layout";
  static constexpr std::string_view message =
      "commit_order SQ4: two columns of the table have the same name (the source_offset and "
      "source_partition columns count) -- rename one, or name those two with table_layout's "
      "last parameters";
  static constexpr std::string_view prevents = "two values written to one column";
};

struct sqlite_column_type final {
  static constexpr std::string_view id = "SQ5";
  static constexpr std::string_view part = "sqlite::column";
  static constexpr std::string_view message =
      "commit_order SQ5: no SQLite storage class for this member's type -- use bool, an integer "
      "(not an unsigned 64-bit one: SQLite's integers are signed), an enum, float, double or a "
      "string";
  static constexpr std::string_view prevents = "a value that would not come back as it was written";
};

struct sqlite_version_in_key final {
  static constexpr std::string_view id = "SQ6";
  static constexpr std::string_view part = "sqlite::version_guarded_sink";
  static constexpr std::string_view message =
      "commit_order SQ6: the version a version guard compares is a key column -- every version "
      "of a key would be a row of its own; make the version a value column";
  static constexpr std::string_view prevents = "a guard that never finds the row it guards";
};

struct sqlite_version_not_a_column final {
  static constexpr std::string_view id = "SQ7";
  static constexpr std::string_view part = "sqlite::version_guarded_sink";
  static constexpr std::string_view message =
      "commit_order SQ7: the version a version guard compares is not one of the table's value "
      "columns -- add sqlite::column<\"version\", &Event::version> to value_columns, so the "
      "upsert can compare the stored version";
  static constexpr std::string_view prevents = "a guard comparing a value the table does not keep";
};

struct sqlite_version_not_a_number final {
  static constexpr std::string_view id = "SQ8";
  static constexpr std::string_view part = "sqlite::version_guarded_sink";
  static constexpr std::string_view message =
      "commit_order SQ8: the version a version guard compares is not a number -- use an integer "
      "or floating-point member the producer raises per key (an event sequence, a CDC log "
      "position)";
  static constexpr std::string_view prevents = "versions compared as text or as a flag";
};

struct sqlite_unsafe_journal final {
  static constexpr std::string_view id = "SQ9";
  static constexpr std::string_view part = "sqlite durability modes";
  static constexpr std::string_view message =
      "commit_order SQ9: a rollback journal with synchronous=NORMAL is not offered: a power cut "
      "at the wrong moment can corrupt the database -- use wal_normal (Buffered) or "
      "delete_extra / wal_full (Synced)";
  static constexpr std::string_view prevents = "a database a power cut can corrupt";
};

// ---- PG: PostgreSQL -------------------------------------------------------------------------

struct postgres_identifier final {
  static constexpr std::string_view id = "PG1";
  static constexpr std::string_view part = "postgres::column, postgres::table_layout";
  static constexpr std::string_view message =
      "commit_order PG1: a name in a PostgreSQL table layout is not a plain identifier -- the "
      "table's and every column's name (source_offset and source_partition too) is "
      "[A-Za-z_][A-Za-z0-9_]*, at most 63 characters";
  static constexpr std::string_view prevents = "a name that changes a statement's meaning";
};

struct postgres_empty_key final {
  static constexpr std::string_view id = "PG2";
  static constexpr std::string_view part = "postgres::table_layout";
  static constexpr std::string_view message =
      "commit_order PG2: the table's key_columns<> is empty -- the upsert conflicts on the key: "
      "name at least one column, e.g. postgres::key_columns<postgres::column<\"id\", "
      "&Event::id>>";
  static constexpr std::string_view prevents = "an upsert with no key to conflict on";
};

struct postgres_column_elsewhere final {
  static constexpr std::string_view id = "PG3";
  static constexpr std::string_view part = "postgres::table_layout";
  static constexpr std::string_view message =
      "commit_order PG3: a column holds a member of another type than the table's event -- "
      "every postgres::column<\"name\", &Event::member> of table_layout<\"table\", Event, ...> "
      "points into Event";
  static constexpr std::string_view prevents = "rows built from members the event does not have";
};

struct postgres_duplicate_column final {
  static constexpr std::string_view id = "PG4";
  static constexpr std::string_view part = "postgres::table_layout";
  static constexpr std::string_view message =
      "commit_order PG4: two columns of the table have the same name (the source_offset and "
      "source_partition columns count) -- rename one, or name those two with table_layout's "
      "last parameters";
  static constexpr std::string_view prevents = "two values written to one column";
};

struct postgres_column_type final {
  static constexpr std::string_view id = "PG5";
  static constexpr std::string_view part = "postgres::column";
  static constexpr std::string_view message =
      "commit_order PG5: no PostgreSQL type for this member's type -- use bool, an integer (not "
      "an unsigned 64-bit one: BIGINT is signed), an enum, float, double or a string";
  static constexpr std::string_view prevents = "a value that would not come back as it was written";
};

struct postgres_version_elsewhere final {
  static constexpr std::string_view id = "PG6";
  static constexpr std::string_view part = "postgres::version_guarded_sink";
  static constexpr std::string_view message =
      "commit_order PG6: the version guard's member is not a member of the table's event -- "
      "version_guarded_sink<D, &Event::version> takes a member of D's event type";
  static constexpr std::string_view prevents = "a guard comparing a value the rows do not carry";
};

struct postgres_version_not_a_column final {
  static constexpr std::string_view id = "PG7";
  static constexpr std::string_view part = "postgres::version_guarded_sink";
  static constexpr std::string_view message =
      "commit_order PG7: the version guard's member is not one of the table's value columns -- "
      "add postgres::column<\"version\", &Event::version> to value_columns, so the upsert can "
      "compare the stored version";
  static constexpr std::string_view prevents = "a guard comparing a value the table does not keep";
};

struct postgres_letter_format final {
  static constexpr std::string_view id = "PG8";
  static constexpr std::string_view part = "postgres::dead_letters";
  static constexpr std::string_view message =
      "commit_order PG8: the dead letters' Letter does not give a letter's bytes -- it needs "
      "static std::optional<std::vector<std::byte>> key(const Event&) and value(const Event&), "
      "e.g. kafka::letter_bytes<Codec>";
  static constexpr std::string_view prevents = "a dead letter that keeps nothing of its record";
};

// ---- KF: Kafka ------------------------------------------------------------------------------

struct kafka_source_policy final {
  static constexpr std::string_view id = "KF1";
  static constexpr std::string_view part = "kafka sources";
  static constexpr std::string_view message =
      "commit_order KF1: a Kafka source's second parameter is the pipeline's policy -- "
      "group_source<Event, AtLeastOnce<>, Codec>, with the policy the pipeline names";
  static constexpr std::string_view prevents = "a consumer configured for another commit order";
};

struct kafka_codec_decodes final {
  static constexpr std::string_view id = "KF2";
  static constexpr std::string_view part = "kafka sources, kafka::tolerant, kafka::with_deletes";
  static constexpr std::string_view message =
      "commit_order KF2: the codec does not decode the event -- it needs static Event "
      "decode(std::span<const std::byte>) or static Event decode(const kafka::message&)";
  static constexpr std::string_view prevents = "messages refused, or reinterpreted, one by one";
};

struct kafka_trivial_codec_event final {
  static constexpr std::string_view id = "KF3";
  static constexpr std::string_view part = "kafka::trivial_codec";
  static constexpr std::string_view message =
      "commit_order KF3: kafka::trivial_codec copies the event's bytes and the event is not "
      "trivially copyable (a std::string member is a pointer into this process) -- read and "
      "write the topic with a codec of its format, e.g. json::codec";
  static constexpr std::string_view prevents = "addresses sent to a topic as if they were data";
};

struct kafka_offset_store_source final {
  static constexpr std::string_view id = "KF4";
  static constexpr std::string_view part = "kafka::offset_store";
  static constexpr std::string_view message =
      "commit_order KF4: kafka::offset_store commits through a group_source's or an "
      "assigned_source's consumer and was given another source -- for a partition_source use "
      "kafka::partition_offset_store";
  static constexpr std::string_view prevents = "offsets committed for a consumer that has none";
};

struct kafka_transactional_sink_source final {
  static constexpr std::string_view id = "KF8";
  static constexpr std::string_view part = "kafka::transactional_sink";
  static constexpr std::string_view message =
      "commit_order KF8: kafka::transactional_sink stores its positions as a consumer group's "
      "offsets and was given a source that is not a kafka::group_source -- read the input with a "
      "group_source on the cluster the sink writes to";
  static constexpr std::string_view prevents =
      "offsets committed for a member the coordinator cannot check";
};

struct kafka_layout_maps_row final {
  static constexpr std::string_view id = "KF9";
  static constexpr std::string_view part = "kafka::transactional_sink";
  static constexpr std::string_view message =
      "commit_order KF9: the sink's Layout does not map its Row to a message -- it needs const "
      "members topic(const Row&) (a string_view) and value(const Row&, std::vector<std::byte>&), "
      "as kafka::keyed_layout<&Row::member> has";
  static constexpr std::string_view prevents = "rows sent to a topic in a shape nobody chose";
};

struct kafka_layout_members final {
  static constexpr std::string_view id = "KF10";
  static constexpr std::string_view part = "kafka::transactional_sink";
  static constexpr std::string_view message =
      "commit_order KF10: the sink's Layout names key or headers but not in the shape the sink "
      "calls -- key(const Row&, std::vector<std::byte>&) const and headers(const Row&, "
      "std::vector<kafka::header_out>&) const";
  static constexpr std::string_view prevents = "keys or headers skipped without a word";
};

struct kafka_letter_format final {
  static constexpr std::string_view id = "KF11";
  static constexpr std::string_view part = "kafka::transactional_dead_letters";
  static constexpr std::string_view message =
      "commit_order KF11: the dead letters' Letter does not give a letter's bytes -- it needs "
      "static std::optional<std::vector<std::byte>> key(const Event&) and value(const Event&), "
      "where Event is the pipeline's source event (kafka::letter_bytes<Codec> gives them for "
      "kafka::decoded<E>, the event of a kafka::tolerant codec)";
  static constexpr std::string_view prevents = "a dead letter that keeps nothing of its record";
};

struct kafka_producer_codec final {
  static constexpr std::string_view id = "KF5";
  static constexpr std::string_view part = "kafka::producer";
  static constexpr std::string_view message =
      "commit_order KF5: the producer's codec does not encode the event -- it needs static void "
      "encode(const Event&, std::vector<std::byte>&) beside decode";
  static constexpr std::string_view prevents = "a topic written in a format nobody can read";
};

struct kafka_key_codec final {
  static constexpr std::string_view id = "KF6";
  static constexpr std::string_view part = "kafka::with_deletes";
  static constexpr std::string_view message =
      "commit_order KF6: with_deletes' key codec does not decode the key -- it needs static Key "
      "decode(std::span<const std::byte>) in the producer's key format (big_endian_codec<"
      "std::int64_t> for Java's LongSerializer, string_codec for text)";
  static constexpr std::string_view prevents = "a tombstone that deletes another key";
};

struct kafka_big_endian_integer final {
  static constexpr std::string_view id = "KF7";
  static constexpr std::string_view part = "kafka::big_endian_codec";
  static constexpr std::string_view message =
      "commit_order KF7: big_endian_codec<T> takes an integer type -- it is the format of "
      "Kafka's integer serializers; for text take kafka::string_codec, for another type write "
      "a codec of its own";
  static constexpr std::string_view prevents = "a value read in a byte order nobody wrote";
};

// ---- JS: the JSON codec ---------------------------------------------------------------------

struct json_no_fields final {
  static constexpr std::string_view id = "JS1";
  static constexpr std::string_view part = "json::codec";
  static constexpr std::string_view message =
      "commit_order JS1: json::codec has no fields -- list the event's members in "
      "json::fields<json::field<\"name\", &Event::member>...>";
  static constexpr std::string_view prevents = "events decoded from nothing";
};

struct json_duplicate_field final {
  static constexpr std::string_view id = "JS2";
  static constexpr std::string_view part = "json::codec";
  static constexpr std::string_view message =
      "commit_order JS2: two fields have the same JSON name -- a key appears once in an object; "
      "rename one";
  static constexpr std::string_view prevents = "two members read from one key";
};

struct json_field_elsewhere final {
  static constexpr std::string_view id = "JS3";
  static constexpr std::string_view part = "json::codec";
  static constexpr std::string_view message =
      "commit_order JS3: a field names a member of another type than the codec's event -- every "
      "json::field<\"name\", &Event::member> of json::codec<Event, ...> points into Event";
  static constexpr std::string_view prevents = "events decoded into members they do not have";
};

struct json_field_type final {
  static constexpr std::string_view id = "JS4";
  static constexpr std::string_view part = "json::codec";
  static constexpr std::string_view message =
      "commit_order JS4: a field's type has no exact JSON reading -- use bool, an integer, a "
      "floating-point type, std::string, or std::optional of one of them";
  static constexpr std::string_view prevents = "a value read one way and written another";
};

struct json_event_default_constructible final {
  static constexpr std::string_view id = "JS5";
  static constexpr std::string_view part = "json::codec";
  static constexpr std::string_view message =
      "commit_order JS5: the event must be default-constructible -- decoding starts from Event{} "
      "and sets each field's member";
  static constexpr std::string_view prevents = "an event built with members no field sets";
};

// ---- the registry ---------------------------------------------------------------------------

template <class... Rules>
struct rule_list final {
  static constexpr std::size_t size = sizeof...(Rules);
};

/// Every rule a part checks of itself, by family.
using all_part_rules =
    rule_list<max_transaction_rows_zero, retry_count_zero, memory_idempotent_without_key,
              memory_guard_without_upsert, memory_append_only_upsert, file_trivial_codec_event,
              file_codec_shape, file_sync_policy, sqlite_identifier, sqlite_empty_key,
              sqlite_column_elsewhere, sqlite_duplicate_column, sqlite_column_type,
              sqlite_version_in_key, sqlite_version_not_a_column, sqlite_version_not_a_number,
              sqlite_unsafe_journal, postgres_identifier, postgres_empty_key,
              postgres_column_elsewhere, postgres_duplicate_column, postgres_column_type,
              postgres_version_elsewhere, postgres_version_not_a_column, postgres_letter_format,
              kafka_source_policy, kafka_codec_decodes, kafka_trivial_codec_event,
              kafka_offset_store_source, kafka_producer_codec, kafka_key_codec,
              kafka_big_endian_integer, kafka_transactional_sink_source, kafka_layout_maps_row,
              kafka_layout_members, kafka_letter_format, json_no_fields, json_duplicate_field,
              json_field_elsewhere, json_field_type, json_event_default_constructible>;

namespace detail {
template <class Rule, class List>
struct registered;
template <class Rule, class... Rules>
struct registered<Rule, rule_list<Rules...>>
    : std::bool_constant<(std::is_same_v<Rule, Rules> || ...)> {};

// FNV-1a over every id and message, in order (as rules::registry_fingerprint): `require`'s
// generated block carries the value it was generated from.
constexpr std::uint64_t fnv1a(std::uint64_t h, std::string_view text) noexcept {
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}
template <class... Rules>
constexpr std::uint64_t fingerprint(rule_list<Rules...>) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  ((h = fnv1a(fnv1a(h, Rules::id), Rules::message)), ...);
  return h;
}
// The fingerprint, as a value that depends on the rule being checked: the generated block
// compares it when a check is evaluated (require<Rule, ...>), so a stale block fails the checks
// and nothing else.
template <class Rule>
inline constexpr std::uint64_t fingerprint_for = fingerprint(all_part_rules{});
}  // namespace detail

/// True when Rule is in `all_part_rules`.
template <class Rule>
inline constexpr bool is_registered_v = detail::registered<Rule, all_part_rules>::value;

/// The fingerprint of the registry (ids and messages of `all_part_rules`, in order).
inline constexpr std::uint64_t registry_fingerprint = detail::fingerprint(all_part_rules{});

/// The key a part stands on once its own check refused the key it was given (MM1, SQ2, SQ3,
/// PG2, PG3): a stateless projection of any row, so that the rules judging the part afterwards
/// (R8, S15) add nothing to the check's one error. Only a program that already failed to compile
/// names it.
struct refused_key final {
  template <class Row>
  constexpr std::tuple<> operator()(const Row&) const noexcept {
    return {};
  }
};

}  // namespace commit_order::part_rules
