// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka.hpp — the Kafka adapter, on librdkafka: group-managed and
// manually assigned sources, a transactional topic sink (read-process-write) and an
// at-least-once one, Kafka's committed offsets as a position store, lag reports of a sink's
// positions, and (testing kit) librdkafka's in-process mock cluster with a producer.
// Links librdkafka: target commit_order::kafka.
#pragma once

// First: a part's failed check (part_rules) is then reported under a short chain of includes.
#include "commit_order/part_checks.hpp"

#include "commit_order/adapters/kafka/codec.hpp"
#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/lag_reports.hpp"
#include "commit_order/adapters/kafka/layout.hpp"
#include "commit_order/adapters/kafka/mock_cluster.hpp"
#include "commit_order/adapters/kafka/offset_store.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/adapters/kafka/source.hpp"
#include "commit_order/adapters/kafka/topic_sink.hpp"
#include "commit_order/adapters/kafka/transactional_sink.hpp"
