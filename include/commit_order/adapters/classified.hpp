// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/classified.hpp — one shape for the errors of the storage adapters: a
// failed call is the record's fault or the world's, and carries the storage's own code. Code
// that handles the failures of several adapters includes this header and catches
// `commit_order::adapters::classified_failure`; the errors themselves are named through
// sqlite:: or postgres:: (`sqlite::record_error`, `postgres::infrastructure_error`, ...).
//
// The SQLite and PostgreSQL adapters classify by different codes (an extended result code, a
// SQLSTATE) but into the same two kinds, with the same consequence in the pipeline:
//   record_failure<Code>  a commit_order::error: the row a record makes was refused for its
//                         values; the pipeline's error handling (stop, retry<N>, dead_letter<N>)
//                         acts on it.
//   world_failure<Code>   a commit_order::infrastructure_error: the storage, the network, the
//                         schema; the unit is rolled back and redone, the position held.
// Both derive from `Code` (the storage's code mixin), which derives from classified_failure:
// `blame()` says which kind an error is without naming the adapter, and always agrees with
// whether the error is an infrastructure_error (the only thing the loop looks at). Each adapter
// names its two as classes of its own (`sqlite::record_error : record_failure<result_code>`),
// so that code which caught, constructed or derived from them before keeps compiling.
#pragma once

#include <string>
#include <string_view>

#include "commit_order/errors.hpp"

namespace commit_order::adapters {

/// Whose fault a failed storage call is.
enum class fault : unsigned char {
  record,  ///< the row a record makes was refused for its values
  world,   ///< anything else: the storage, the network, the schema, the sink's own statement
};

/// Base, beside the std::exception base, of every error a storage adapter throws for a failed
/// call of its storage.
class classified_failure {
 public:
  classified_failure(const classified_failure&) = default;
  classified_failure& operator=(const classified_failure&) = default;
  virtual ~classified_failure() = default;

  /// The record's fault (the error is a commit_order::error that is not an
  /// infrastructure_error) or the world's (it is an infrastructure_error).
  [[nodiscard]] fault blame() const noexcept { return blame_; }

 protected:
  explicit classified_failure(fault blame) noexcept : blame_(blame) {}

 private:
  fault blame_;
};

/// The world's failure of a call, with the storage's code. `Code` is the storage's code mixin:
/// a classified_failure with `code_type`, `prefix` (the adapter's message prefix) and a
/// constructor `(code_type, fault)`.
template <class Code>
class world_failure : public commit_order::infrastructure_error, public Code {
 public:
  world_failure(typename Code::code_type code, std::string_view what)
      : commit_order::infrastructure_error(std::string(Code::prefix).append(what))
      , Code(code, fault::world) {}
};

/// The record's failure of a call (its row refused for its values), with the storage's code.
template <class Code>
class record_failure : public commit_order::error, public Code {
 public:
  record_failure(typename Code::code_type code, std::string_view what)
      : commit_order::error(std::string(Code::prefix).append(what)), Code(code, fault::record) {}
};

namespace detail {
/// Throws the error `code` classifies: `Record` (a record_failure) when
/// `Record::is_record_failure(code)`, else `World` (a world_failure), each constructed from
/// `(code, what)`. Cold and out of line: a message is only ever built here, after a call has
/// failed.
template <class Record, class World, class CodeType>
[[noreturn, gnu::cold, gnu::noinline]] void raise_classified(CodeType code, std::string_view what) {
  if (Record::is_record_failure(code))
    throw Record(code, what);
  throw World(code, what);
}
}  // namespace detail

}  // namespace commit_order::adapters
