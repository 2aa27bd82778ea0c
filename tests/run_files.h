// Reading a run directory's files in tests: a whole file, and metrics.jsonl without its timing.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace drift::test {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p.string(), std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A metrics.jsonl without its timing fields (they come last on every line, from "tokens_per_s").
inline std::string no_timing(const std::string& text) {
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) out += line.substr(0, line.find(",\"tokens_per_s\"")) + "\n";
  return out;
}

}  // namespace drift::test
