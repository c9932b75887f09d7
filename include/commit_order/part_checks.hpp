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
struct file_trivial_codec_event;
struct file_codec_shape;
struct file_sync_policy;
struct kafka_source_policy;
struct kafka_codec_decodes;
struct kafka_trivial_codec_event;
struct kafka_offset_store_source;
struct kafka_producer_codec;
struct kafka_key_codec;
struct kafka_big_endian_integer;
struct json_no_fields;
struct json_duplicate_field;
struct json_field_elsewhere;
struct json_field_type;
struct json_event_default_constructible;
template <class Rule, bool Holds>
constexpr bool require() {
  static_assert(is_registered_v<Rule>,
                "commit_order: a part checks a rule that is not in part_rules::all_part_rules");
  static_assert(detail::fingerprint_for<Rule> == 0xd8cfe4cdc75c60b0ULL,
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
    static_assert(!std::is_same_v<Rule, file_trivial_codec_event>,
                  "commit_order FL1: file::trivial_codec writes the event's bytes and the event is not trivially copyable (a std::string member is a pointer into this process) -- give file::log a codec with an explicit format");
    static_assert(!std::is_same_v<Rule, file_codec_shape>,
                  "commit_order FL2: the log's codec does not encode and decode its event -- it needs static void encode(const Event&, std::vector<std::byte>&) and static Event decode(std::span<const std::byte>)");
    static_assert(!std::is_same_v<Rule, file_sync_policy>,
                  "commit_order FL3: the log's Sync is not a sync policy -- use file::sync_each_append (Synced) or file::sync_on_flush (Buffered)");
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
                  "commit_order KF7: big_endian_codec<T> takes an integer type -- it is the format of Kafka's integer serializers; write a codec of its own for another type");
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
