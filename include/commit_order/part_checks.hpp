// SPDX-License-Identifier: BSL-1.0
// commit_order/part_checks.hpp — where a part's check fails: one static_assert per rule of
// part_rules::all_part_rules (part_rules.hpp), each with the rule's message.
//
// A check site says `static_assert(part_rules::require<part_rules::some_rule, holds>());`.
// `require` is true whatever it is given; when `holds` is false, the static_assert below that
// carries the rule's message fails inside it. The failure is in a function's body, not in the
// site's class: a static_assert failing in a class body makes clang give up on the class, and
// every later use of it becomes an error too. So the site's class stays valid, and the rule's
// message is the one error of a misuse (a site whose later code would fail on what the rule
// refused stands on a harmless stand-in once the rule has spoken, part_rules::refused_key for
// one).
//
// The block is generated from the registry by tools/rule_checks.cpp (`cmake --build <dir>
// --target rule_checks`; never edit it by hand) and carries the registry's fingerprint, which
// every evaluated check compares: a rule added, removed or reworded without regenerating the
// block fails to compile, naming that command.
#pragma once

#include <type_traits>

#include "commit_order/part_rules.hpp"

namespace commit_order::part_rules {

/// `require<Rule, Holds>()`: true. When `Holds` is false, the static_assert carrying Rule's
/// message fails: a site checks `static_assert(part_rules::require<Rule, holds>());` and the
/// message is its one error. The rules are declared again in the block, so that a stale block
/// still compiles where no check is evaluated (the tool that regenerates it, say).
template <class Rule, bool Holds>
constexpr bool require();

// BEGIN GENERATED PART RULE CHECKS
// clang-format off
struct max_transaction_rows_zero;
struct retry_count_zero;
struct memory_idempotent_without_key;
struct memory_guard_without_upsert;
struct memory_append_only_upsert;
struct file_trivial_codec_event;
struct file_codec_shape;
struct file_sync_policy;
struct sqlite_identifier;
struct sqlite_empty_key;
struct sqlite_column_elsewhere;
struct sqlite_duplicate_column;
struct sqlite_column_type;
struct sqlite_version_in_key;
struct sqlite_version_not_a_column;
struct sqlite_version_not_a_number;
struct sqlite_unsafe_journal;
struct postgres_identifier;
struct postgres_empty_key;
struct postgres_column_elsewhere;
struct postgres_duplicate_column;
struct postgres_column_type;
struct postgres_version_elsewhere;
struct postgres_version_not_a_column;
struct postgres_letter_format;
struct kafka_source_policy;
struct kafka_codec_decodes;
struct kafka_trivial_codec_event;
struct kafka_offset_store_source;
struct kafka_producer_codec;
struct kafka_key_codec;
struct kafka_big_endian_integer;
struct kafka_transactional_sink_source;
struct kafka_layout_maps_row;
struct kafka_layout_members;
struct kafka_letter_format;
struct json_no_fields;
struct json_duplicate_field;
struct json_field_elsewhere;
struct json_field_type;
struct json_event_default_constructible;
template <class Rule, bool Holds>
constexpr bool require() {
  static_assert(is_registered_v<Rule>,
                "commit_order: a part checks a rule that is not in part_rules::all_part_rules");
  static_assert(detail::fingerprint_for<Rule> == 0xeb9c9349ff28ac69ULL,
                "commit_order: the part rule checks in part_checks.hpp are stale -- regenerate them with `cmake --build <dir> --target rule_checks`");
  if constexpr (!Holds) {
    static_assert(!std::is_same_v<Rule, max_transaction_rows_zero>,
                  "commit_order CO1: MaxTransactionRows<N> needs N >= 1 -- a transaction of no rows would never move the position; leave the tag out for no limit");
    static_assert(!std::is_same_v<Rule, retry_count_zero>,
                  "commit_order CO2: retry<N> and retry_world<N> need N >= 1 -- use stop (the default) for no retries");
    static_assert(!std::is_same_v<Rule, memory_idempotent_without_key>,
                  "commit_order MM1: an Idempotent memory::table needs a key -- name it, e.g. memory::table<Row, key<&Row::id>, capabilities<Idempotent, Volatile>>");
    static_assert(!std::is_same_v<Rule, memory_guard_without_upsert>,
                  "commit_order MM2: OffsetGuarded and VersionGuarded are conditions on a keyed upsert -- declare Idempotent, with a key, beside them");
    static_assert(!std::is_same_v<Rule, memory_append_only_upsert>,
                  "commit_order MM3: an AppendOnly memory::table cannot upsert -- a log keeps every row it is given; drop Idempotent, the key and any guard, or drop AppendOnly");
    static_assert(!std::is_same_v<Rule, file_trivial_codec_event>,
                  "commit_order FL1: file::trivial_codec writes the event's bytes and the event is not trivially copyable (a std::string member is a pointer into this process) -- give file::log a codec with an explicit format");
    static_assert(!std::is_same_v<Rule, file_codec_shape>,
                  "commit_order FL2: the log's codec does not encode and decode its event -- it needs static void encode(const Event&, std::vector<std::byte>&) and static Event decode(std::span<const std::byte>)");
    static_assert(!std::is_same_v<Rule, file_sync_policy>,
                  "commit_order FL3: the log's Sync is not a sync policy -- use file::sync_each_append (Synced) or file::sync_on_flush (Buffered)");
    static_assert(!std::is_same_v<Rule, sqlite_identifier>,
                  "commit_order SQ1: a name in a SQLite table layout is not a plain identifier -- the table's and every column's name (source_offset and source_partition too) is [A-Za-z_][A-Za-z0-9_]*, at most 64 characters");
    static_assert(!std::is_same_v<Rule, sqlite_empty_key>,
                  "commit_order SQ2: the table's key_columns<> is empty -- the upsert conflicts on the key: name at least one column, e.g. sqlite::key_columns<sqlite::column<\"id\", &Event::id>>");
    static_assert(!std::is_same_v<Rule, sqlite_column_elsewhere>,
                  "commit_order SQ3: a column holds a member of another type than the table's event -- every sqlite::column<\"name\", &Event::member> of table_layout<\"table\", Event, ...> points into Event");
    static_assert(!std::is_same_v<Rule, sqlite_duplicate_column>,
                  "commit_order SQ4: two columns of the table have the same name (the source_offset and source_partition columns count) -- rename one, or name those two with table_layout's last parameters");
    static_assert(!std::is_same_v<Rule, sqlite_column_type>,
                  "commit_order SQ5: no SQLite storage class for this member's type -- use bool, an integer (not an unsigned 64-bit one: SQLite's integers are signed), an enum, float, double or a string");
    static_assert(!std::is_same_v<Rule, sqlite_version_in_key>,
                  "commit_order SQ6: the version a version guard compares is a key column -- every version of a key would be a row of its own; make the version a value column");
    static_assert(!std::is_same_v<Rule, sqlite_version_not_a_column>,
                  "commit_order SQ7: the version a version guard compares is not one of the table's value columns -- add sqlite::column<\"version\", &Event::version> to value_columns, so the upsert can compare the stored version");
    static_assert(!std::is_same_v<Rule, sqlite_version_not_a_number>,
                  "commit_order SQ8: the version a version guard compares is not a number -- use an integer or floating-point member the producer raises per key (an event sequence, a CDC log position)");
    static_assert(!std::is_same_v<Rule, sqlite_unsafe_journal>,
                  "commit_order SQ9: a rollback journal with synchronous=NORMAL is not offered: a power cut at the wrong moment can corrupt the database -- use wal_normal (Buffered) or delete_extra / wal_full (Synced)");
    static_assert(!std::is_same_v<Rule, postgres_identifier>,
                  "commit_order PG1: a name in a PostgreSQL table layout is not a plain identifier -- the table's and every column's name (source_offset and source_partition too) is [A-Za-z_][A-Za-z0-9_]*, at most 63 characters");
    static_assert(!std::is_same_v<Rule, postgres_empty_key>,
                  "commit_order PG2: the table's key_columns<> is empty -- the upsert conflicts on the key: name at least one column, e.g. postgres::key_columns<postgres::column<\"id\", &Event::id>>");
    static_assert(!std::is_same_v<Rule, postgres_column_elsewhere>,
                  "commit_order PG3: a column holds a member of another type than the table's event -- every postgres::column<\"name\", &Event::member> of table_layout<\"table\", Event, ...> points into Event");
    static_assert(!std::is_same_v<Rule, postgres_duplicate_column>,
                  "commit_order PG4: two columns of the table have the same name (the source_offset and source_partition columns count) -- rename one, or name those two with table_layout's last parameters");
    static_assert(!std::is_same_v<Rule, postgres_column_type>,
                  "commit_order PG5: no PostgreSQL type for this member's type -- use bool, an integer (not an unsigned 64-bit one: BIGINT is signed), an enum, float, double or a string");
    static_assert(!std::is_same_v<Rule, postgres_version_elsewhere>,
                  "commit_order PG6: the version guard's member is not a member of the table's event -- version_guarded_sink<D, &Event::version> takes a member of D's event type");
    static_assert(!std::is_same_v<Rule, postgres_version_not_a_column>,
                  "commit_order PG7: the version guard's member is not one of the table's value columns -- add postgres::column<\"version\", &Event::version> to value_columns, so the upsert can compare the stored version");
    static_assert(!std::is_same_v<Rule, postgres_letter_format>,
                  "commit_order PG8: the dead letters' Letter does not give a letter's bytes -- it needs static std::optional<std::vector<std::byte>> key(const Event&) and value(const Event&), e.g. kafka::letter_bytes<Codec>");
    static_assert(!std::is_same_v<Rule, kafka_source_policy>,
                  "commit_order KF1: a Kafka source's second parameter is the pipeline's policy -- group_source<Event, AtLeastOnce<>, Codec>, with the policy the pipeline names");
    static_assert(!std::is_same_v<Rule, kafka_codec_decodes>,
                  "commit_order KF2: the codec does not decode the event -- it needs static Event decode(std::span<const std::byte>) or static Event decode(const kafka::message&)");
    static_assert(!std::is_same_v<Rule, kafka_trivial_codec_event>,
                  "commit_order KF3: kafka::trivial_codec copies the event's bytes and the event is not trivially copyable (a std::string member is a pointer into this process) -- read and write the topic with a codec of its format, e.g. json::codec");
    static_assert(!std::is_same_v<Rule, kafka_offset_store_source>,
                  "commit_order KF4: kafka::offset_store commits through a group_source's or an assigned_source's consumer and was given another source -- for a partition_source use kafka::partition_offset_store");
    static_assert(!std::is_same_v<Rule, kafka_producer_codec>,
                  "commit_order KF5: the producer's codec does not encode the event -- it needs static void encode(const Event&, std::vector<std::byte>&) beside decode");
    static_assert(!std::is_same_v<Rule, kafka_key_codec>,
                  "commit_order KF6: with_deletes' key codec does not decode the key -- it needs static Key decode(std::span<const std::byte>) in the producer's key format (big_endian_codec<std::int64_t> for Java's LongSerializer, string_codec for text)");
    static_assert(!std::is_same_v<Rule, kafka_big_endian_integer>,
                  "commit_order KF7: big_endian_codec<T> takes an integer type -- it is the format of Kafka's integer serializers; for text take kafka::string_codec, for another type write a codec of its own");
    static_assert(!std::is_same_v<Rule, kafka_transactional_sink_source>,
                  "commit_order KF8: kafka::transactional_sink stores its positions as a consumer group's offsets and was given a source that is not a kafka::group_source -- read the input with a group_source on the cluster the sink writes to");
    static_assert(!std::is_same_v<Rule, kafka_layout_maps_row>,
                  "commit_order KF9: the sink's Layout does not map its Row to a message -- it needs const members topic(const Row&) (a string_view) and value(const Row&, std::vector<std::byte>&), as kafka::keyed_layout<&Row::member> has");
    static_assert(!std::is_same_v<Rule, kafka_layout_members>,
                  "commit_order KF10: the sink's Layout names key or headers but not in the shape the sink calls -- key(const Row&, std::vector<std::byte>&) const and headers(const Row&, std::vector<kafka::header_out>&) const");
    static_assert(!std::is_same_v<Rule, kafka_letter_format>,
                  "commit_order KF11: the dead letters' Letter does not give a letter's bytes -- it needs static std::optional<std::vector<std::byte>> key(const Event&) and value(const Event&), where Event is the pipeline's source event (kafka::letter_bytes<Codec> gives them for kafka::decoded<E>, the event of a kafka::tolerant codec)");
    static_assert(!std::is_same_v<Rule, json_no_fields>,
                  "commit_order JS1: json::codec has no fields -- list the event's members in json::fields<json::field<\"name\", &Event::member>...>");
    static_assert(!std::is_same_v<Rule, json_duplicate_field>,
                  "commit_order JS2: two fields have the same JSON name -- a key appears once in an object; rename one");
    static_assert(!std::is_same_v<Rule, json_field_elsewhere>,
                  "commit_order JS3: a field names a member of another type than the codec's event -- every json::field<\"name\", &Event::member> of json::codec<Event, ...> points into Event");
    static_assert(!std::is_same_v<Rule, json_field_type>,
                  "commit_order JS4: a field's type has no exact JSON reading -- use bool, an integer, a floating-point type, std::string, or std::optional of one of them");
    static_assert(!std::is_same_v<Rule, json_event_default_constructible>,
                  "commit_order JS5: the event must be default-constructible -- decoding starts from Event{} and sets each field's member");
  }
  return true;
}
// clang-format on
// END GENERATED PART RULE CHECKS

}  // namespace commit_order::part_rules
