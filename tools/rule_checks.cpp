// SPDX-License-Identifier: BSL-1.0
// tools/rule_checks.cpp -- writes pipeline.hpp's static_assert block from rules::all_rules.
//
//   rule_checks <pipeline.hpp>            rewrites the block between the markers in place
//   rule_checks <pipeline.hpp> --check    exits 1 (saying why) when the block is stale
//
// C++20 needs a string literal in static_assert, so each rule's message has to be spelled out
// where the assertion sits; this tool spells it out from the rule's own `message`, so a rule is
// still written once. The block also carries the registry's fingerprint, which pipeline.hpp
// checks at compile time: a rule added, removed or reworded without regenerating the block is a
// compile error, never a rule that is judged but not reported (or reported with old words).
// It includes rules.hpp only, never pipeline.hpp: it must build while the block is stale.
#include <commit_order/rules.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

namespace co = commit_order;

namespace {

constexpr std::string_view begin_marker = "    // BEGIN GENERATED RULE CHECKS\n";
constexpr std::string_view end_marker = "    // END GENERATED RULE CHECKS\n";

// `text` as a C++ string literal.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + '"';
}

template <class Rule>
std::string type_name() {
  // g++: "... [with Rule = ns::name; ...]"; clang: "... [Rule = ns::name]".
  const std::string_view f = __PRETTY_FUNCTION__;
  const auto start = f.find("Rule = ") + 7;
  const auto end = f.find_first_of(";]", start);
  std::string_view full = f.substr(start, end - start);
  constexpr std::string_view prefix = "commit_order::";
  if (full.starts_with(prefix))
    full.remove_prefix(prefix.size());
  return std::string(full);
}

template <class... Rules>
std::string block(co::rules::rule_list<Rules...>) {
  std::ostringstream out;
  out << begin_marker << "    // clang-format off\n";
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%016llxULL",
                static_cast<unsigned long long>(co::rules::registry_fingerprint));
  out << "    static_assert(rules::registry_fingerprint == " << hex << ",\n"
      << "                  \"commit_order: the rule checks in pipeline.hpp are stale -- "
         "regenerate "
         "them with `cmake --build <dir> --target rule_checks`\");\n";
  auto one = [&out]<class Rule>(std::type_identity<Rule>) {
    out << "    static_assert(!std::is_same_v<verdict, " << type_name<Rule>() << ">,\n"
        << "                  " << literal(Rule::message) << ");\n";
  };
  (one(std::type_identity<Rules>{}), ...);
  out << "    // clang-format on\n" << end_marker;
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: rule_checks <pipeline.hpp> [--check]\n";
    return 2;
  }
  const std::string path = argv[1];
  const bool check = argc > 2 && std::string_view(argv[2]) == "--check";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "rule_checks: cannot read " << path << "\n";
    return 2;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const auto from = text.find(begin_marker);
  const auto to = text.find(end_marker);
  if (from == std::string::npos || to == std::string::npos || to < from) {
    std::cerr << "rule_checks: " << path << " has no generated block between the markers\n";
    return 2;
  }
  const std::string generated = block(co::rules::all_rules{});
  const std::string updated =
      text.substr(0, from) + generated + text.substr(to + end_marker.size());
  if (check) {
    if (updated != text) {
      std::cerr << "rule_checks: the generated rule checks in " << path
                << " do not match rules::all_rules -- run `cmake --build <dir> --target "
                   "rule_checks`\n";
      return 1;
    }
    std::cout << "rule_checks: " << co::rules::all_rules::size << " rules, block current\n";
    return 0;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << updated;
  std::cout << "rule_checks: wrote " << co::rules::all_rules::size << " rule checks to " << path
            << "\n";
  return out ? 0 : 1;
}
