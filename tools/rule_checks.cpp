// SPDX-License-Identifier: BSL-1.0
// tools/rule_checks.cpp -- writes the generated static_assert blocks from the two registries:
// pipeline.hpp's from rules::all_rules, and part_checks.hpp's (part_rules::require) from
// part_rules::all_part_rules.
//
//   rule_checks <pipeline.hpp> <part_checks.hpp>            rewrites both blocks in place
//   rule_checks <pipeline.hpp> <part_checks.hpp> --check    exits 1 (saying why) when either
//                                                           block is stale
//
// C++20 needs a string literal in static_assert, so each rule's message has to be spelled out
// where the assertion sits; this tool spells it out from the rule's own `message`, so a rule is
// still written once. Each block also carries its registry's fingerprint, which the header
// checks at compile time: a rule added, removed or reworded without regenerating the block is a
// compile error, never a rule that is judged but not reported (or reported with old words).
// It includes the registries, never pipeline.hpp: it must build while a block is stale (which
// is why part_checks.hpp's block declares the rules it names).
#include <commit_order/part_rules.hpp>
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

std::string hex(std::uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%016llxULL", static_cast<unsigned long long>(value));
  return text;
}

template <class Rule>
std::string type_name() {
  // g++: "... [with Rule = ns::name; ...]"; clang: "... [Rule = ns::name]".
  const std::string_view f = __PRETTY_FUNCTION__;
  const auto start = f.find("Rule = ") + 7;
  const auto end = f.find_first_of(";]", start);
  std::string_view full = f.substr(start, end - start);
  for (const std::string_view prefix : {"commit_order::part_rules::", "commit_order::"}) {
    if (full.starts_with(prefix)) {
      full.remove_prefix(prefix.size());
      break;
    }
  }
  return std::string(full);
}

/// One generated block: its markers and its text.
struct block final {
  std::string_view begin_marker;
  std::string_view end_marker;
  std::string text;
};

// pipeline.hpp: in the constructor, one assertion per rule on the configuration's verdict.
template <class... Rules>
block pipeline_block(co::rules::rule_list<Rules...>) {
  block b{"    // BEGIN GENERATED RULE CHECKS\n", "    // END GENERATED RULE CHECKS\n", {}};
  std::ostringstream out;
  out << b.begin_marker << "    // clang-format off\n";
  out << "    static_assert(rules::registry_fingerprint == " << hex(co::rules::registry_fingerprint)
      << ",\n"
      << "                  \"commit_order: the rule checks in pipeline.hpp are stale -- "
         "regenerate "
         "them with `cmake --build <dir> --target rule_checks`\");\n";
  auto one = [&out]<class Rule>(std::type_identity<Rule>) {
    out << "    static_assert(!std::is_same_v<verdict, " << type_name<Rule>() << ">,\n"
        << "                  " << literal(Rule::message) << ");\n";
  };
  (one(std::type_identity<Rules>{}), ...);
  out << "    // clang-format on\n" << b.end_marker;
  b.text = out.str();
  return b;
}

// part_checks.hpp: require<Rule, Holds>(), one assertion per rule, on the rule checked. The
// rules are declared again before it, so that a block naming a rule since removed or renamed
// still compiles (this tool includes it, through rules.hpp) and only fails when a check is
// evaluated, on the fingerprint.
template <class... Rules>
block part_block(co::part_rules::rule_list<Rules...>) {
  block b{"// BEGIN GENERATED PART RULE CHECKS\n", "// END GENERATED PART RULE CHECKS\n", {}};
  std::ostringstream out;
  out << b.begin_marker << "// clang-format off\n";
  auto declare = [&out]<class Rule>(std::type_identity<Rule>) {
    out << "struct " << type_name<Rule>() << ";\n";
  };
  (declare(std::type_identity<Rules>{}), ...);
  out << "template <class Rule, bool Holds>\n"
      << "constexpr bool require() {\n"
      << "  static_assert(is_registered_v<Rule>,\n"
      << "                \"commit_order: a part checks a rule that is not in "
         "part_rules::all_part_rules\");\n"
      << "  static_assert(detail::fingerprint_for<Rule> == "
      << hex(co::part_rules::registry_fingerprint) << ",\n"
      << "                \"commit_order: the part rule checks in part_checks.hpp are stale -- "
         "regenerate them with `cmake --build <dir> --target rule_checks`\");\n"
      << "  if constexpr (!Holds) {\n";
  auto one = [&out]<class Rule>(std::type_identity<Rule>) {
    out << "    static_assert(!std::is_same_v<Rule, " << type_name<Rule>() << ">,\n"
        << "                  " << literal(Rule::message) << ");\n";
  };
  (one(std::type_identity<Rules>{}), ...);
  out << "  }\n  return true;\n}\n// clang-format on\n" << b.end_marker;
  b.text = out.str();
  return b;
}

/// Rewrites (or, with `check`, compares) the block of `path`. Returns 0, 1 (stale) or 2.
int update(const std::string& path, const block& b, std::size_t count, bool check) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "rule_checks: cannot read " << path << "\n";
    return 2;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const auto from = text.find(b.begin_marker);
  const auto to = text.find(b.end_marker);
  if (from == std::string::npos || to == std::string::npos || to < from) {
    std::cerr << "rule_checks: " << path << " has no generated block between the markers\n";
    return 2;
  }
  const std::string updated = text.substr(0, from) + b.text + text.substr(to + b.end_marker.size());
  if (check) {
    if (updated != text) {
      std::cerr << "rule_checks: the generated checks in " << path
                << " do not match their registry -- run `cmake --build <dir> --target "
                   "rule_checks`\n";
      return 1;
    }
    std::cout << "rule_checks: " << count << " checks in " << path << ", block current\n";
    return 0;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << updated;
  std::cout << "rule_checks: wrote " << count << " checks to " << path << "\n";
  return out ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: rule_checks <pipeline.hpp> <part_checks.hpp> [--check]\n";
    return 2;
  }
  const bool check = argc > 3 && std::string_view(argv[3]) == "--check";
  const int pipeline =
      update(argv[1], pipeline_block(co::rules::all_rules{}), co::rules::all_rules::size, check);
  const int parts = update(argv[2], part_block(co::part_rules::all_part_rules{}),
                           co::part_rules::all_part_rules::size, check);
  return pipeline > parts ? pipeline : parts;
}
