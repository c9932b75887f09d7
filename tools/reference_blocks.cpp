// SPDX-License-Identifier: BSL-1.0
// tools/reference_blocks.cpp -- docs/reference.md's code, as one translation unit.
//
//   reference_blocks <reference.md> <output.cpp>
//
// Every ```cpp block of the document, in order, at namespace scope, so that later blocks use
// the types of earlier ones as the reader does; each block's #include lines first (once each).
// A #line directive before each block makes a compile error name the document's own line.
// Compiling the result is what keeps the page from going stale: a header that renames or
// removes something the page shows breaks that compile. A document without a single block is
// refused: a check of nothing must not pass.
#include <cstddef>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct block final {
  std::size_t first_line = 0;  // 1-based line of the document where the code starts
  std::vector<std::string> lines;
};

bool is_include(const std::string& line) {
  return line.rfind("#include", 0) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: reference_blocks <reference.md> <output.cpp>\n";
    return 2;
  }
  const std::string doc = argv[1];
  std::ifstream in(doc);
  if (!in) {
    std::cerr << "reference_blocks: cannot read " << doc << "\n";
    return 1;
  }

  std::vector<block> blocks;
  bool inside = false;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!inside && line == "```cpp") {
      inside = true;
      blocks.push_back(block{number + 1, {}});
    } else if (inside && line.rfind("```", 0) == 0) {
      inside = false;
    } else if (inside) {
      blocks.back().lines.push_back(line);
    }
  }
  if (inside) {
    std::cerr << "reference_blocks: " << doc << ": a ```cpp block is never closed\n";
    return 1;
  }
  if (blocks.empty()) {
    std::cerr << "reference_blocks: " << doc << " has no ```cpp block: nothing to check\n";
    return 1;
  }

  std::ostringstream out;
  out << "// Generated from " << doc << " by tools/reference_blocks.cpp: do not edit.\n";
  std::set<std::string> included;
  for (const block& b : blocks)
    for (const std::string& l : b.lines)
      if (is_include(l) && included.insert(l).second)
        out << l << "\n";
  for (const block& b : blocks) {
    out << "#line " << b.first_line << " \"" << doc << "\"\n";
    // An #include already emitted above leaves an empty line, so the numbering still holds.
    for (const std::string& l : b.lines)
      out << (is_include(l) ? std::string() : l) << "\n";
  }
  out << "#line 1 \"reference_blocks\"\nint main() { return 0; }\n";

  std::ofstream file(argv[2], std::ios::binary | std::ios::trunc);
  file << out.str();
  if (!file) {
    std::cerr << "reference_blocks: cannot write " << argv[2] << "\n";
    return 1;
  }
  std::cout << "reference_blocks: " << blocks.size() << " blocks of " << doc << "\n";
  return 0;
}
