# SPDX-License-Identifier: BSL-1.0
# cases.cmake -- the compile-fail cases: one per rule (the pipeline's and the parts'), each a
# file in cases/ whose illegal line sits under #ifdef COMMIT_ORDER_COMPILE_FAIL and whose #else
# is the nearest legal configuration. Read by CMakeLists.txt (to register the tests) and by
# tools/measure_diagnostics.cmake (to measure them), which define compile_fail_case first.
#
# compile_fail_case(<case> <rule id> <expected message: a stable prefix of the rule's text>)
# The expectation is typed here on purpose, not taken from rules.hpp or part_rules.hpp: the test
# pins the text.

compile_fail_case(r0_malformed_step_order R0
  "commit_order R0: the policy's step list is malformed")
compile_fail_case(r1_auto_commit_non_idempotent R1
  "commit_order R1: AutoCommit needs an Idempotent sink")
compile_fail_case(r2_auto_commit_at_least_once R2
  "commit_order R2: AutoCommit makes this no-loss step order at-most-once")
compile_fail_case(r2_auto_commit_transactional R2
  "commit_order R2: AutoCommit makes this no-loss step order at-most-once")
compile_fail_case(r3_replay_duplicate_rows R3
  "commit_order R3: this policy replays after a crash")
compile_fail_case(r4_position_needs_transactional R4
  "commit_order R4: the position cannot be stored in a sink without multi-row transactions")
compile_fail_case(r5_offset_guard R5
  "commit_order R5: TransactionalPosition needs an OffsetGuarded sink")
compile_fail_case(r5_append_only R5
  "commit_order R5: TransactionalPosition needs an OffsetGuarded sink")
compile_fail_case(r6_ledger R6
  "commit_order R6: this policy may lose records and the sink is a Ledger")
compile_fail_case(r7_side_effecting R7
  "commit_order R7: a SideEffecting sink cannot be made idempotent by ordering")
compile_fail_case(r8_stateful_key R8
  "commit_order R8: the idempotency key must be a stateless projection of the event")
compile_fail_case(r8_key_without_event R8
  "commit_order R8: the idempotency key must be a stateless projection of the event")
compile_fail_case(r8_key_ignores_event R8
  "commit_order R8: the idempotency key must be a stateless projection of the event")
compile_fail_case(r9a_sink_less_durable_than_store R9a
  "commit_order R9a: this policy makes the write durable before the position, and the sink is less durable")
compile_fail_case(r9b_store_less_durable_than_sink R9b
  "commit_order R9b: this policy makes the position durable before the write, and the position store is less durable")
compile_fail_case(r9c_source_less_durable R9c
  "commit_order R9c: the source is less durable than the position stored for it")
compile_fail_case(r10_store_missing R10
  "commit_order R10: this policy commits its position to a position store and none was given")
compile_fail_case(r11_dead_letters_missing R11
  "commit_order R11: dead_letter error handling needs somewhere to put the records")
compile_fail_case(r12_dead_letters_less_durable R12
  "commit_order R12: the dead-letter sink is less durable than the sink")
compile_fail_case(r13_executor_needs_concurrent_sink R13
  "commit_order R13: writes handed to an executor run on several threads")
compile_fail_case(r14_executor_splits_transaction R14
  "commit_order R14: a sink transaction belongs to one thread")
compile_fail_case(r15_out_of_order_needs_offset_guard R15
  "commit_order R15: writes handed to an executor land out of order")
compile_fail_case(r20_executor_flushing_sink R20
  "commit_order R20: this sink makes rows durable only at flush()")
compile_fail_case(r21_letters_need_their_sink R21
  "commit_order R21: these dead letters commit in their own sink's transaction")
compile_fail_case(r16_retry_needs_idempotent_sink R16
  "commit_order R16: retrying a write outside a transaction can apply it twice")
compile_fail_case(r16_world_retry_needs_idempotent_sink R16
  "commit_order R16: retrying a write outside a transaction can apply it twice")
compile_fail_case(s30_flush_not_callable S30
  "commit_order S30: the sink declares Flushed or has a flush member, and the pipeline cannot")
compile_fail_case(s30_wrapper_drops_flush S30
  "commit_order S30: the sink declares Flushed or has a flush member, and the pipeline cannot")
compile_fail_case(s1_not_a_policy S1
  "commit_order S1: Policy is not a policy")
compile_fail_case(s2_not_a_source S2
  "commit_order S2: Source does not model commit_order::source")
compile_fail_case(s3_not_a_sink S3
  "commit_order S3: Sink does not model commit_order::sink")
compile_fail_case(s4_bad_transform S4
  "commit_order S4: the transform must be a stateless, default-constructible function object")
compile_fail_case(s5_row_mismatch S5
  "commit_order S5: the sink's row_type cannot be built from the source's events")
compile_fail_case(s6_undeclared_capabilities S6
  "commit_order S6: the sink declares no capabilities")
compile_fail_case(s6_lag_reports_of_undeclared_sink S6
  "commit_order S6: the sink declares no capabilities")
compile_fail_case(s7_transactional_shape S7
  "commit_order S7: the sink declares Transactional but lacks begin\\(\\), commit\\(\\) or rollback\\(\\)")
compile_fail_case(s8_not_a_position_store S8
  "commit_order S8: the position store does not model commit_order::position_store")
compile_fail_case(s9_bad_error_handling S9
  "commit_order S9: unknown error handling")
compile_fail_case(s10_not_dead_letters S10
  "commit_order S10: the dead-letter sink does not model commit_order::dead_letter_sink")
compile_fail_case(s11_not_an_executor S11
  "commit_order S11: the executor does not model commit_order::executor")
compile_fail_case(s12_unused_dead_letters S12
  "commit_order S12: a dead-letter sink is given but the error handling never uses it")
compile_fail_case(s13_not_a_trigger S13
  "commit_order S13: the policy's argument is not a commit trigger")
compile_fail_case(s14_apply_takes_mutable_row S14
  "commit_order S14: the sink's apply takes the row by non-const reference")
compile_fail_case(s15_keyless_idempotency S15
  "commit_order S15: the sink declares Idempotent or OffsetGuarded but names no key")
compile_fail_case(s29_append_only_upsert S29
  "commit_order S29: the sink declares AppendOnly and an upsert")
compile_fail_case(s16_transactional_position_shape S16
  "commit_order S16: the sink declares Transactional but lacks store_position\\(position\\) or load_position\\(\\)")
compile_fail_case(s17_load_position_type S17
  "commit_order S17: the sink's load_position\\(\\) must return std::optional<position>")
compile_fail_case(s18_unused_store S18
  "commit_order S18: a position store is given but this policy keeps its position in the sink's transaction")
compile_fail_case(s19_unused_clock S19
  "commit_order S19: a clock is given but only AutoCommit's timer reads one")
compile_fail_case(s20_bad_clock S20
  "commit_order S20: the clock cannot drive AutoCommit's timer")
compile_fail_case(s21_bad_fault_injector S21
  "commit_order S21: the fault injector needs at\\(const fault_point&\\)")
compile_fail_case(s22_observer_hook_mismatch S22
  "commit_order S22: an observer's on\\(event, ...\\) overload does not take what the pipeline passes")
compile_fail_case(s23_sink_durability_undeclared S23
  "commit_order S23: the sink declares no durability")
compile_fail_case(s24_store_durability_undeclared S24
  "commit_order S24: the position store declares no durability")
compile_fail_case(s25_source_durability_undeclared S25
  "commit_order S25: the source declares no durability")
compile_fail_case(s26_partition_scoped_apply S26
  "commit_order S26: the sink declares PartitionScoped but has no apply\\(partition_id, offset, const row_type&\\)")
compile_fail_case(s27_source_policy_mismatch S27
  "commit_order S27: the source was built for another policy than the pipeline's")
compile_fail_case(s28_derived_sink_restates_durability S28
  "commit_order S28: the sink restates capabilities its adapter does not implement")
compile_fail_case(r17_offset_guard_needs_partition R17
  "commit_order R17: a partitioned source feeds an offset-guarded sink whose rows do not carry their partition")
compile_fail_case(r18_group_needs_fencing_sink R18
  "commit_order R18: a group-managed source moves partitions between consumers and this sink cannot fence")
compile_fail_case(r19_positions_per_partition R19
  "commit_order R19: a partitioned source has one position per partition")
compile_fail_case(repeated_option S0
  "commit_order S0: unknown or repeated pipeline option")
compile_fail_case(unknown_option S0
  "commit_order S0: unknown or repeated pipeline option")

# The same rules on real storage: the SQLite sink's plain append mode.
compile_fail_case(sqlite_append_at_least_once R3
  "commit_order R3: this policy replays after a crash")
compile_fail_case(sqlite_append_transactional R5
  "commit_order R5: TransactionalPosition needs an OffsetGuarded sink")

# Constructor mistakes: pipeline's own constructor reports the first one (id "ctor").
compile_fail_case(ctor_store_not_passed ctor
  "commit_order: pass the position store named by with_store<> to the constructor")
compile_fail_case(ctor_dead_letters_not_passed ctor
  "commit_order: pass the dead-letter sink named by with_dead_letters<> to the constructor")
compile_fail_case(ctor_wrong_type ctor
  "commit_order: unexpected constructor argument")
compile_fail_case(ctor_temporary_sink ctor
  "commit_order: the sink must outlive the pipeline")
compile_fail_case(ctor_temporary_store ctor
  "commit_order: the position store, dead-letter sink and executor must outlive the pipeline")

# An executor without its header: the executor path is not in the umbrella (id "include").
compile_fail_case(executor_header_missing include
  "commit_order: with_executor needs #include <commit_order/executor.hpp>")

# The stand-in for a rejected pipeline offers every member: only the rule's error (id
# "surface": the case checks the stand-in, through R3's message).
compile_fail_case(rejected_surface surface
  "commit_order R3: this policy replays after a crash")

# The rules the parts check of themselves (part_rules::all_part_rules, include/commit_order/
# part_rules.hpp): one case per id, by family -- CO core vocabulary, MM memory, FL file, SQ
# SQLite, PG PostgreSQL, KF Kafka, JS JSON. PG3, KF3 and S28 are the cases issue 22 quotes,
# written as a new user would.
compile_fail_case(co1_max_transaction_rows_zero CO1
  "commit_order CO1: MaxTransactionRows<N> needs N >= 1")
compile_fail_case(co2_retry_zero CO2
  "commit_order CO2: retry<N> and retry_world<N> need N >= 1")
compile_fail_case(mm1_memory_idempotent_without_key MM1
  "commit_order MM1: an Idempotent memory::table needs a key")
compile_fail_case(mm2_memory_guard_without_upsert MM2
  "commit_order MM2: OffsetGuarded and VersionGuarded are conditions on a keyed upsert")
compile_fail_case(mm3_memory_append_only_upsert MM3
  "commit_order MM3: an AppendOnly memory::table cannot upsert")
compile_fail_case(fl1_string_member_default_codec FL1
  "commit_order FL1: file::trivial_codec writes the event's bytes and the event is not trivially copyable \\(a std::string member is a pointer into this process\\)")
compile_fail_case(fl2_file_log_codec_shape FL2
  "commit_order FL2: the log's codec does not encode and decode its event")
compile_fail_case(fl3_file_log_sync_policy FL3
  "commit_order FL3: the log's Sync is not a sync policy")
compile_fail_case(sq1_name_not_an_identifier SQ1
  "commit_order SQ1: a name in a SQLite table layout is not a plain identifier")
compile_fail_case(sq2_empty_key SQ2
  "commit_order SQ2: the table's key_columns<> is empty")
compile_fail_case(sq3_column_of_another_event SQ3
  "commit_order SQ3: a column holds a member of another type than the table's event")
compile_fail_case(sq4_duplicate_column SQ4
  "commit_order SQ4: two columns of the table have the same name \\(the source_offset and source_partition columns count\\)")
compile_fail_case(sq5_column_type SQ5
  "commit_order SQ5: no SQLite storage class for this member's type")
compile_fail_case(sq6_version_in_key SQ6
  "commit_order SQ6: the version a version guard compares is a key column")
compile_fail_case(sq7_version_not_a_column SQ7
  "commit_order SQ7: the version a version guard compares is not one of the table's value columns")
compile_fail_case(sq8_version_not_a_number SQ8
  "commit_order SQ8: the version a version guard compares is not a number")
compile_fail_case(sq9_unsafe_journal SQ9
  "commit_order SQ9: a rollback journal with synchronous=NORMAL is not offered: a power cut at the wrong moment can corrupt the database")
compile_fail_case(pg1_name_not_an_identifier PG1
  "commit_order PG1: a name in a PostgreSQL table layout is not a plain identifier")
compile_fail_case(pg2_empty_key PG2
  "commit_order PG2: the table's key_columns<> is empty")
compile_fail_case(pg3_column_of_another_event PG3
  "commit_order PG3: a column holds a member of another type than the table's event")
compile_fail_case(pg4_duplicate_column PG4
  "commit_order PG4: two columns of the table have the same name \\(the source_offset and source_partition columns count\\)")
compile_fail_case(pg5_column_type PG5
  "commit_order PG5: no PostgreSQL type for this member's type")
compile_fail_case(pg6_version_of_another_event PG6
  "commit_order PG6: the version guard's member is not a member of the table's event")
compile_fail_case(pg7_version_not_a_column PG7
  "commit_order PG7: the version guard's member is not one of the table's value columns")
compile_fail_case(pg8_letter_format PG8
  "commit_order PG8: the dead letters' Letter does not give a letter's bytes")
compile_fail_case(kf1_source_policy KF1
  "commit_order KF1: a Kafka source's second parameter is the pipeline's policy")
compile_fail_case(kf2_codec_not_decoder KF2
  "commit_order KF2: the codec does not decode the event")
compile_fail_case(kf3_string_member_default_codec KF3
  "commit_order KF3: kafka::trivial_codec copies the event's bytes and the event is not trivially copyable \\(a std::string member is a pointer into this process\\)")
compile_fail_case(kf4_offset_store_source KF4
  "commit_order KF4: kafka::offset_store commits through a group_source's or an assigned_source's consumer and was given another source")
compile_fail_case(kf5_producer_codec KF5
  "commit_order KF5: the producer's codec does not encode the event")
compile_fail_case(kf6_key_codec KF6
  "commit_order KF6: with_deletes' key codec does not decode the key")
compile_fail_case(kf7_big_endian_integer KF7
  "commit_order KF7: big_endian_codec<T> takes an integer type")
compile_fail_case(kf8_transactional_sink_source KF8
  "commit_order KF8: kafka::transactional_sink stores its positions as a consumer group's offsets and was given a source that is not a kafka::group_source")
compile_fail_case(kf9_layout_maps_row KF9
  "commit_order KF9: the sink's Layout does not map its Row to a message")
compile_fail_case(kf10_layout_members KF10
  "commit_order KF10: the sink's Layout names key or headers but not in the shape the sink calls")
compile_fail_case(kf11_letter_format KF11
  "commit_order KF11: the dead letters' Letter does not give a letter's bytes")
compile_fail_case(js1_no_fields JS1
  "commit_order JS1: json::codec has no fields")
compile_fail_case(js2_duplicate_field_name JS2
  "commit_order JS2: two fields have the same JSON name")
compile_fail_case(js3_field_of_another_event JS3
  "commit_order JS3: a field names a member of another type than the codec's event")
compile_fail_case(js4_unsupported_field_type JS4
  "commit_order JS4: a field's type has no exact JSON reading")
compile_fail_case(js5_event_not_default_constructible JS5
  "commit_order JS5: the event must be default-constructible")
