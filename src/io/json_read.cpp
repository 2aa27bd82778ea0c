#include "io/json_read.h"

#include <set>
#include <vector>

namespace drift::io {

namespace {

// Parses with a callback that tracks the keys of every open object; a repeated key throws.
template <typename Json>
bool parse_strict(const std::string& text, const std::string& source, Json& out, bool syntax_errors_throw) {
  struct Open {
    std::set<std::string> keys;
    std::string name;  // this object's key in its parent ("" at the root or in a list)
  };
  std::vector<Open> open;
  std::string pending_key;  // the key of the value about to be parsed
  auto path = [&](const std::string& key) {
    std::string p;
    for (const Open& o : open)
      if (!o.name.empty()) p += (p.empty() ? "" : ".") + o.name;
    return p.empty() ? key : p + "." + key;
  };
  const std::string prefix = source.empty() ? "" : source + ": ";  // (an inline value: the caller names it)
  auto callback = [&](int, typename Json::parse_event_t ev, Json& parsed) -> bool {
    using E = typename Json::parse_event_t;
    if (ev == E::object_start) {
      open.push_back({{}, pending_key});
      pending_key.clear();
    } else if (ev == E::object_end) {
      open.pop_back();
    } else if (ev == E::array_start) {
      pending_key.clear();
    } else if (ev == E::key) {
      const std::string k = parsed.template get<std::string>();
      if (!open.back().keys.insert(k).second)
        throw IoError(prefix + "duplicate key '" + path(k) + "' (each key may appear once in an object)");
      pending_key = k;
    } else if (ev == E::value) {
      pending_key.clear();
    }
    return true;
  };
  try {
    out = Json::parse(text, callback);
    return true;
  } catch (const typename Json::parse_error& e) {
    if (!syntax_errors_throw) return false;
    throw IoError(prefix + "not valid JSON (" + json_error_text(e) + ")");
  } catch (const typename Json::out_of_range& e) {
    // 406: a number that overflows a double; the key being read is the one it belongs to.
    const std::string at = pending_key.empty() ? "" : " at " + path(pending_key);
    throw IoError(prefix + "a number out of range" + at + " (" + json_error_text(e) +
                  "; a number must fit a double, magnitude below 1.8e308)");
  } catch (const typename Json::exception& e) {
    throw IoError(prefix + "not valid JSON (" + json_error_text(e) + ")");
  }
}

}  // namespace

std::string json_error_text(const std::exception& e) {
  std::string s = e.what();
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t end = s.find("] ");
    if (end != std::string::npos) s.erase(0, end + 2);
  }
  return s;
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  nlohmann::json j;
  parse_strict(text, source, j, true);
  return j;
}

nlohmann::ordered_json parse_ordered_json(const std::string& text, const std::string& source) {
  nlohmann::ordered_json j;
  parse_strict(text, source, j, true);
  return j;
}

bool try_parse_json(const std::string& text, const std::string& source, nlohmann::json& out) {
  return parse_strict(text, source, out, false);
}

std::vector<TextLine> split_lines(const std::string& text) {
  std::vector<TextLine> lines;
  size_t start = 0, number = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const bool cut = nl == std::string::npos;
    ++number;
    if ((cut ? text.size() : nl) > start) lines.push_back({text.substr(start, (cut ? text.size() : nl) - start), number, cut});
    start = cut ? text.size() : nl + 1;
  }
  return lines;
}

nlohmann::json read_json_file(const std::string& path, const char* kind) {
  return parse_json(read_regular_file(path, kind, kMaxJsonBytes), path);
}

nlohmann::ordered_json read_ordered_json_file(const std::string& path, const char* kind) {
  return parse_ordered_json(read_regular_file(path, kind, kMaxJsonBytes), path);
}

}  // namespace drift::io
