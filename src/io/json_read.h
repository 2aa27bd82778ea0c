// The one way drift parses JSON that comes from outside (config files, --set values, a run's
// config.json, summary.json, metrics.jsonl lines, sweep and policy files): strictly. A key twice
// in one object is an error (nlohmann would keep the last silently), and so is a number beyond
// double range (1e400). Errors are IoErrors "<source>: <what>", without the library's
// "[json.exception...]" tags.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/io_error.h"
#include "io/read_file.h"

namespace drift::io {

// `text` as JSON; `source` names it in errors (a file name, "--set train.lr", "X line 3"; "" for an
// inline value that the caller's error names).
nlohmann::json parse_json(const std::string& text, const std::string& source);
nlohmann::ordered_json parse_ordered_json(const std::string& text, const std::string& source);

// The same, or nullopt-like: false when `text` is not JSON at all (a syntax error), so that a caller
// may take it as something else (a --set value as a bare string). Number overflow and duplicate keys
// still throw: such text is JSON, just not acceptable JSON.
bool try_parse_json(const std::string& text, const std::string& source, nlohmann::json& out);

// A JSON file read through read_regular_file (a regular file of at most kMaxJsonBytes).
nlohmann::json read_json_file(const std::string& path, const char* kind);
nlohmann::ordered_json read_ordered_json_file(const std::string& path, const char* kind);

// The non-empty lines of a JSON-lines file (metrics.jsonl, diag.jsonl): each line's text, its
// 1-based number, and whether it ends without a newline (the last line of a write cut short).
struct TextLine {
  std::string text;
  size_t number = 0;
  bool cut = false;
};
std::vector<TextLine> split_lines(const std::string& text);

// A library exception's message without its "[json.exception.type.N] " tag.
std::string json_error_text(const std::exception& e);

}  // namespace drift::io
