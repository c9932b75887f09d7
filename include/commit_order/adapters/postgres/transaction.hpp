// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/transaction.hpp — the one object that knows where a sink's
// transaction stands with the server, as one state: the sink asks it before every call that
// needs a transaction, and it alone queues BEGIN and sends COMMIT and ROLLBACK for it (the
// probes that look for a refused row are transactions of their own: sink.hpp).
//
//   phase        reached by                                       left by
//   idle         construction; a commit; rollback()               begin()
//   buffering    begin(); restart() (the unit goes again whole)   queue_begin(), fail(),
//                                                                 commit_nothing()
//   open         queue_begin(): BEGIN goes with the next round    commit(), fail()
//                trip, and the server holds the transaction
//   committing   commit(): COMMIT sent, its answer not read yet   its answer, or its loss
//   in_doubt     the connection failed while committing           rollback()
//   failed       fail() after any failed call (what the server    rollback(), restart()
//                held is rolled back); COMMIT refused
//
// A connection lost before COMMIT was sent took the transaction with it (the server discards
// an open transaction of a connection that is gone): nothing of it happened. One lost after
// COMMIT was sent and before its answer arrived may have committed: `commit_in_doubt`, never
// sent again, and recovery reads which from the positions the transaction stored.
#pragma once

#include <stdexcept>
#include <string_view>
#include <utility>

#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/text.hpp"

namespace commit_order::postgres::detail {

/// Ends whatever transaction `db` has open on the server: ROLLBACK, or, if even that fails, the
/// connection (the server discards the transaction of a connection that is gone).
inline void roll_back(connection& db) noexcept {
  if (!db.in_transaction())
    return;
  try {
    db.exec("ROLLBACK");
  } catch (...) {
    db.drop();
  }
}

/// A sink's transaction on one connection (which it does not own).
class transaction final {
 public:
  enum class phase : unsigned char {
    idle,        ///< no transaction
    buffering,   ///< begun; nothing sent: the whole unit is in the sink's buffer
    open,        ///< BEGIN was sent: the server holds the transaction
    committing,  ///< COMMIT was sent; its answer is not read yet
    in_doubt,    ///< the connection failed after COMMIT was sent, before its answer arrived
    failed,      ///< a call failed; nothing of it is open on the server; rollback() ends it
  };

  explicit transaction(connection& db) noexcept : db_(&db) {}
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;

  [[nodiscard]] phase state() const noexcept { return phase_; }
  /// begin() was called, and neither a commit nor rollback() has ended the transaction.
  [[nodiscard]] bool begun() const noexcept { return phase_ != phase::idle; }
  /// The server holds the transaction: a statement sent now runs inside it.
  [[nodiscard]] bool on_server() const noexcept { return phase_ == phase::open; }

  void begin() {
    if (phase_ != phase::idle)
      throw std::logic_error("commit_order::postgres: begin() inside an open transaction");
    phase_ = phase::buffering;
  }

  /// `what` is called inside the transaction: it must have begun, and not failed.
  void require(const char* what) const {
    if (phase_ != phase::buffering && phase_ != phase::open) [[unlikely]]
      refuse(what);
  }
  /// `what` is called outside any transaction.
  void require_none(const char* what) const {
    if (phase_ != phase::idle)
      throw std::logic_error(concat("commit_order::postgres: ", what, " inside a transaction"));
  }

  /// Queues BEGIN unless the server holds the transaction already, reopening a connection lost
  /// since the last transaction first (nothing of this one was on it). True if it queued BEGIN.
  bool queue_begin() {
    if (phase_ == phase::open)
      return false;
    db_->ensure();
    db_->send("BEGIN");
    phase_ = phase::open;
    return true;
  }

  /// Sends COMMIT and reads its answer. Returns it: success (the transaction is over), or the
  /// server's refusal (a deferred constraint, a serialization failure: the server rolled the
  /// transaction back), for the caller to classify. Throws `commit_in_doubt`, naming what
  /// `stored()` returns (the positions the transaction stored), when the connection failed
  /// before the answer arrived; any other failure of the round trip as it is.
  template <class Stored>
  result commit(Stored&& stored) {
    db_->send("COMMIT");  // queued only: a connection already gone fails here, sending nothing
    phase_ = phase::committing;
    try {
      db_->run();
    } catch (const infrastructure_error& e) {
      if (db_->connected()) {
        // The server answered, and the connection says why it is not the answer wanted (a
        // COMMIT acknowledged after its wait for a standby was cancelled: connection::run).
        phase_ = phase::failed;
        throw;
      }
      phase_ = phase::in_doubt;
      throw commit_in_doubt(e.sqlstate(), without_prefix(e.what()), stored());
    }
    result r = std::move(db_->results().front());
    phase_ = r.ok() ? phase::idle : phase::failed;
    return r;
  }

  /// Ends a transaction of which nothing was sent (an empty unit): nothing to commit.
  void commit_nothing() noexcept { phase_ = phase::idle; }

  /// A call failed: what the server holds of the transaction is rolled back now, and nothing
  /// more is taken until rollback(). A transaction in doubt stays in doubt.
  void fail() noexcept {
    roll_back(*db_);
    if (phase_ != phase::in_doubt)
      phase_ = phase::failed;
  }

  /// The unit goes again from the start (a serialization failure; a connection lost before
  /// COMMIT was sent): nothing of it is on the server.
  void restart() noexcept {
    roll_back(*db_);
    phase_ = phase::buffering;
  }

  /// Ends the transaction, whatever its phase: what the server holds of it is rolled back (if
  /// even ROLLBACK fails, the connection is dropped, which ends it on the server).
  void rollback() noexcept {
    if (phase_ != phase::idle)
      roll_back(*db_);
    phase_ = phase::idle;
  }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void refuse(const char* what) const {
    if (phase_ == phase::idle)
      // Outside a transaction the position would commit on its own, apart from the rows it
      // vouches for: exactly the two-write window the sink exists to close.
      throw std::logic_error(concat("commit_order::postgres: ", what, " outside a transaction"));
    throw std::logic_error(concat("commit_order::postgres: ", what,
                                  " after a failure in the transaction: call rollback() first"));
  }

  static std::string_view without_prefix(std::string_view what) noexcept {
    constexpr std::string_view prefix = "commit_order::postgres: ";
    return what.starts_with(prefix) ? what.substr(prefix.size()) : what;
  }

  connection* db_;
  phase phase_ = phase::idle;
};

}  // namespace commit_order::postgres::detail
