#include "io/tc_vectors.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "arith/tc_presets.h"
#include "io/io_error.h"
#include "io/read_file.h"

namespace drift::io {
namespace {

namespace fs = std::filesystem;

// The single file in dir named <prefix>*<suffix>.
std::string find_one(const std::string& dir, const std::string& prefix, const std::string& suffix, bool required) {
  std::vector<std::string> hits;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string n = e.path().filename().string();
    if (n.size() >= prefix.size() + suffix.size() && n.compare(0, prefix.size(), prefix) == 0 &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      hits.push_back(e.path().string());
  }
  if (ec) throw TcDataError(dir + ": cannot read directory (" + ec.message() + ")");
  if (hits.size() > 1) throw TcDataError(dir + ": more than one " + prefix + "*" + suffix + " file");
  if (hits.empty()) {
    if (required) throw TcDataError(dir + ": no " + prefix + "*" + suffix + " file");
    return "";
  }
  return hits[0];
}

std::vector<std::string> read_lines(const std::string& path) {
  std::string text;
  try {
    text = read_regular_file(path, "tensor-core vector file", kMaxTextInputBytes);
  } catch (const IoError& e) {
    throw TcDataError(e.what());
  }
  std::istringstream in(text);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().find_first_not_of(" \t") == std::string::npos) lines.pop_back();
  return lines;
}

std::string where(const std::string& path, size_t line) { return path + " line " + std::to_string(line); }

uint32_t parse_hex32(const std::string& tok, const std::string& path, size_t line) {
  if (tok.size() != 8 || tok.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw TcDataError(where(path, line) + ": '" + tok + "' is not an 8-digit hexadecimal binary32 pattern");
  return static_cast<uint32_t>(std::stoul(tok, nullptr, 16));
}

uint32_t parse_bits32(const std::string& s, const std::string& path, size_t line) {
  std::string t = s;
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.erase(t.begin());
  if (t.size() != 32 || t.find_first_not_of("01") != std::string::npos)
    throw TcDataError(where(path, line) + ": expected a 32-character string of 0/1 bits, got '" + t + "'");
  uint32_t v = 0;
  for (char ch : t) v = (v << 1) | static_cast<uint32_t>(ch - '0');
  return v;
}

// One line of a or b: K hexadecimal binary32 patterns.
std::vector<uint32_t> parse_hex_line(const std::string& text, const std::string& path, size_t line) {
  std::istringstream ss(text);
  std::vector<uint32_t> v;
  for (std::string tok; ss >> tok;) v.push_back(parse_hex32(tok, path, line));
  if (v.empty()) throw TcDataError(where(path, line) + ": no values");
  return v;
}

}  // namespace

TcVectors read_tc_vectors(const std::string& dir, const std::string& output, bool read_c) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw TcDataError(dir + ": not a directory");
  TcVectors v;
  v.a_file = find_one(dir, "a_", ".txt", true);
  v.b_file = find_one(dir, "b_", ".txt", true);
  v.d_file = find_one(dir, "d_", "_" + output + ".txt", true);
  if (read_c) v.c_file = find_one(dir, "c_", "_fp32.txt", true);
  const auto a_lines = read_lines(v.a_file);
  const auto b_lines = read_lines(v.b_file);
  const auto d_lines = read_lines(v.d_file);
  std::vector<std::string> c_lines;
  if (read_c) c_lines = read_lines(v.c_file);
  const size_t n = a_lines.size();
  auto check_count = [&](const std::string& path, size_t count) {
    if (count != n)
      throw TcDataError(path + ": " + std::to_string(count) + " lines, but " + v.a_file + " has " + std::to_string(n));
  };
  check_count(v.b_file, b_lines.size());
  check_count(v.d_file, d_lines.size());
  if (read_c) check_count(v.c_file, c_lines.size());
  if (n == 0) throw TcDataError(v.a_file + ": no cases");
  for (size_t i = 0; i < n; ++i) {
    const size_t line = i + 1;
    v.a.push_back(parse_hex_line(a_lines[i], v.a_file, line));
    v.b.push_back(parse_hex_line(b_lines[i], v.b_file, line));
    if (v.a.back().size() != v.b.back().size())
      throw TcDataError(where(v.b_file, line) + ": " + std::to_string(v.b.back().size()) + " values, but " + v.a_file +
                        " has " + std::to_string(v.a.back().size()));
    if (read_c) v.c.push_back(parse_bits32(c_lines[i], v.c_file, line));
    v.d.push_back(parse_bits32(d_lines[i], v.d_file, line));
  }
  return v;
}

std::vector<TcMeasured> tc_read_measured(const std::string& dir) {
  const std::string path = (fs::path(dir) / kTcMeasuredFile).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  std::vector<TcMeasured> out;
  const auto lines = read_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string text = lines[i].substr(0, lines[i].find('#'));
    std::istringstream ss(text);
    std::vector<std::string> words;
    for (std::string w; ss >> w;) words.push_back(w);
    if (words.empty()) continue;
    const std::string at = where(path, i + 1);
    if (words.size() != 3 || (words[2] != "c=file" && words[2] != "c=zero"))
      throw TcDataError(at + ": expected '<fp32|fp16> <preset> c=<file|zero>', got '" + text + "'");
    TcMeasured m{words[0], words[1], words[2] == "c=zero"};
    if (m.output != "fp32" && m.output != "fp16")
      throw TcDataError(at + ": output '" + m.output + "' is not fp32 or fp16");
    const auto p = find_tc_preset(m.preset);
    if (!p) throw TcDataError(at + ": unknown preset '" + m.preset + "' (see `drift tcverify --list`)");
    if (p->output != m.output)
      throw TcDataError(at + ": preset " + m.preset + " has " + p->output + " output, not " + m.output);
    for (const auto& earlier : out)
      if (earlier.output == m.output) throw TcDataError(at + ": output " + m.output + " listed twice");
    out.push_back(m);
  }
  if (out.empty()) throw TcDataError(path + ": no '<fp32|fp16> <preset> c=<file|zero>' line");
  return out;
}

std::vector<std::string> tc_measured_sets(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw TcDataError(root + ": not a directory");
  std::vector<std::string> out;
  if (fs::exists(fs::path(root) / kTcMeasuredFile, ec)) out.push_back(root);
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory() && fs::exists(it->path() / kTcMeasuredFile)) out.push_back(it->path().string());
  if (ec) throw TcDataError(root + ": cannot read directory (" + ec.message() + ")");
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> tc_outputs_present(const std::string& dir) {
  std::vector<std::string> out;
  for (const char* o : {"fp32", "fp16"})
    if (!find_one(dir, "d_", std::string("_") + o + ".txt", false).empty()) out.push_back(o);
  return out;
}

}  // namespace drift::io
