// SPDX-License-Identifier: BSL-1.0
// tools/legality_table.cpp -- writes docs/legality.md from the rules themselves.
//
//   legality_table [<output file>]     (stdout without an argument)
//
// Every verdict below is `verdict_t` of a real combination, every guarantee is `guarantee_t`,
// and every id, message and "prevents" is the rule's own member: nothing in the document is
// typed by hand, so it cannot drift from what the compiler enforces.
#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>
#include <commit_order/part_rules.hpp>

#include "support/orders.hpp"

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace co = commit_order;

namespace {

template <class... Ts>
struct type_list final {};

template <class... Ts, class F>
void for_each_type(type_list<Ts...>, F&& f) {
  (f(std::type_identity<Ts>{}), ...);
}
template <class... Rules, class F>
void for_each_rule(co::rules::rule_list<Rules...>, F&& f) {
  (f(std::type_identity<Rules>{}), ...);
}
template <class... Rules, class F>
void for_each_part_rule(co::part_rules::rule_list<Rules...>, F&& f) {
  (f(std::type_identity<Rules>{}), ...);
}

// ---- the parts judged -----------------------------------------------------------------------

// The tests' shared fixtures: the order events, their key and their log.
using test_support::order_event;
using test_support::order_key;
using test_support::order_log;

/// An in-memory table declaring exactly `Caps` (keyed on the event when it is Idempotent).
template <class... Caps>
struct sink_set final {
  static constexpr bool keyed = (std::is_same_v<Caps, co::Idempotent> || ...);
  using type = co::memory::table<order_event, std::conditional_t<keyed, order_key, co::no_key>,
                                 co::capabilities<Caps...>>;
  static std::string label() {
    if constexpr (sizeof...(Caps) == 0) {
      return "plain append";
    } else {
      std::string s;
      ((s += (s.empty() ? "" : " + "), s += Caps::name), ...);
      return s;
    }
  }
};

using sink_sets =
    type_list<sink_set<>, sink_set<co::DuplicatesHarmless>, sink_set<co::Idempotent>,
              sink_set<co::Idempotent, co::OffsetGuarded>,
              sink_set<co::Idempotent, co::OffsetGuarded, co::Transactional>,
              sink_set<co::Transactional>, sink_set<co::AppendOnly, co::Transactional>,
              sink_set<co::AppendOnly, co::Emits>, sink_set<co::Idempotent, co::Transactional>,
              sink_set<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Ledger>,
              sink_set<co::SideEffecting>>;

template <template <class> class Policy>
struct policy_family final {
  template <class Trigger>
  using type = Policy<Trigger>;
};
using policies = type_list<policy_family<co::AtMostOnce>, policy_family<co::AtLeastOnce>,
                           policy_family<co::TransactionalPosition>>;
using triggers = type_list<co::EveryRecord, co::EveryBatch, co::AutoCommit>;

/// The tables are Volatile; where the executed order commits to a position store, it gets one
/// just as durable, so R9 and R10 (rules about the store) do not hide the others.
template <class Policy>
using store_for = std::conditional_t<co::policy_facts_v<Policy>.uses_position_store,
                                     test_support::volatile_store, co::no_position_store>;

// ---- formatting -----------------------------------------------------------------------------

/// Markdown code span around `text`, whatever backticks it contains; `|` escaped for tables.
std::string code(std::string_view text) {
  const bool has_tick = text.find('`') != std::string_view::npos;
  std::string out = has_tick ? "`` " : "`";
  for (char c : text)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  out += has_tick ? " ``" : "`";
  return out;
}

/// Plain table-cell text: `|`, `<` and `>` would end the cell or start an HTML tag.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

template <class T>
constexpr std::string_view type_name() {
  // g++: "... [with T = ns::name; ...]"; clang: "... [T = ns::name]".
  constexpr std::string_view f = __PRETTY_FUNCTION__;
  constexpr auto start = f.find("T = ") + 4;
  constexpr auto end = f.find_first_of(";]", start);
  constexpr std::string_view full = f.substr(start, end - start);
  constexpr std::string_view prefix = "commit_order::";
  return full.starts_with(prefix) ? full.substr(prefix.size()) : full;
}

template <class Steps>
std::string arrows(Steps) {
  std::string s;
  for (std::string_view name : Steps::names)
    s += (s.empty() ? "" : " → ") + std::string(name);
  return s;
}

template <class Policy, class Sink>
std::string verdict_cell() {
  using verdict =
      std::conditional_t<std::is_same_v<store_for<Policy>, co::no_position_store>,
                         co::verdict_t<order_log, Sink, Policy>,
                         co::verdict_t<order_log, Sink, Policy, co::with_store<store_for<Policy>>>>;
  if constexpr (std::is_same_v<verdict, co::rules::legal>) {
    return "legal — " + std::string(co::guarantee_t<Policy>::name);
  } else {
    return "**" + std::string(verdict::id) + "** — " + code(verdict::message);
  }
}

void write(std::ostream& out) {
  out << "# Legality of policies and sinks\n\n"
         "Generated by `tools/legality_table.cpp` (`cmake --build <dir> --target docs`) from the "
         "rules in `include/commit_order/rules.hpp`: each verdict is `verdict_t` of the "
         "combination, each guarantee `guarantee_t` of the policy, each message the rule's own "
         "`message`. Do not edit by hand.\n\n"
         "The sinks are in-memory tables declaring the capabilities shown (and `Volatile`); "
         "where the executed step order commits its position to a separate store, the "
         "combination is given a store just as durable, so rules R9a-c and R10 (about the "
         "store) do not hide the others. A pipeline whose verdict is a rule does not compile: "
         "the rule's message is its one error.\n\n"
         "## Verdicts\n";

  for_each_type(policies{}, [&]<class Family>(std::type_identity<Family>) {
    using claimed = typename Family::template type<co::EveryBatch>;
    out << "\n### " << claimed::name << ": " << arrows(typename claimed::steps{}) << "\n\n"
        << "| sink capabilities | trigger | verdict |\n|---|---|---|\n";
    for_each_type(sink_sets{}, [&]<class Set>(std::type_identity<Set>) {
      for_each_type(triggers{}, [&]<class Trigger>(std::type_identity<Trigger>) {
        using policy = typename Family::template type<Trigger>;
        out << "| " << cell(Set::label()) << " | " << Trigger::name << " | "
            << verdict_cell<policy, typename Set::type>() << " |\n";
      });
    });
  });

  out << "\n## Rules\n\n"
         "In the order `pipeline` checks them (`rules::all_rules`): shape checks (S) first, then "
         "the legality rules (R). Only the first rule a combination violates is reported.\n\n"
         "| id | rule | prevents | message |\n|---|---|---|---|\n";
  for_each_rule(co::rules::all_rules{}, [&]<class Rule>(std::type_identity<Rule>) {
    out << "| " << Rule::id << " | " << code(type_name<Rule>()) << " | " << cell(Rule::prevents)
        << " | " << code(Rule::message) << " |\n";
  });

  out << "\n## Rules of the parts\n\n"
         "What a part checks of its own declaration where it is named or built, before any "
         "pipeline exists (`part_rules::all_part_rules`, in "
         "`include/commit_order/part_rules.hpp`), by family: CO the core vocabulary, MM the "
         "in-memory parts, FL the file log, SQ SQLite, PG PostgreSQL, KF Kafka, JS the JSON "
         "codec. A misuse gives the rule's message as its one error; what the part would have "
         "built on the refused declaration stands on a harmless stand-in, so nothing else "
         "fails.\n\n"
         "| id | rule | part | prevents | message |\n|---|---|---|---|---|\n";
  for_each_part_rule(co::part_rules::all_part_rules{}, [&]<class Rule>(std::type_identity<Rule>) {
    out << "| " << Rule::id << " | " << code(type_name<Rule>()) << " | " << cell(Rule::part)
        << " | " << cell(Rule::prevents) << " | " << code(Rule::message) << " |\n";
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::cerr << "usage: legality_table [<output file> | --ids]\n";
    return 2;
  }
  if (argc == 2 && std::string_view(argv[1]) == "--ids") {
    // One id a line, the pipeline's rules then the parts', for the test that every rule has a
    // compile-fail case.
    auto id = [&]<class Rule>(std::type_identity<Rule>) { std::cout << Rule::id << "\n"; };
    for_each_rule(co::rules::all_rules{}, id);
    for_each_part_rule(co::part_rules::all_part_rules{}, id);
    return 0;
  }
  std::ostringstream text;
  write(text);
  if (argc == 1) {
    std::cout << text.str();
    return 0;
  }
  std::ofstream file(argv[1], std::ios::binary | std::ios::trunc);
  file << text.str();
  file.close();
  if (!file) {
    std::cerr << "legality_table: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
