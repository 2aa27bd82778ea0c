// The config schema (train/config_schema.h) against its documentation: docs/config.md's key table
// lists every key of the schema with the schema's default, and no key the schema does not have.
// The schema's defaults are the config structs' initializers, so a default changed in code and not
// in the docs (or a key added to one and not the other) fails here.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/config_schema.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_config_schema {

using namespace drift;
using json = nlohmann::json;

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t k; (k = s.find(sep, pos)) != std::string::npos; pos = k + sep.size()) out.push_back(s.substr(pos, k - pos));
  out.push_back(s.substr(pos));
  return out;
}

std::string unquote_code(std::string s) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '`' && s.back() == '`') s = s.substr(1, s.size() - 2);
  return s;
}

// docs/config.md, section "## Keys": key -> default cell. A row may name several keys
// ("`train.beta1`, `train.beta2`" or "`precision.loss_scale.min`, `.max`", a leading dot meaning
// the first key's parent) with as many comma-separated defaults.
std::map<std::string, std::string> documented_keys() {
  std::ifstream f(std::string(DRIFT_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(f);
  std::map<std::string, std::string> out;
  std::string line;
  bool in_keys = false;
  while (std::getline(f, line)) {
    if (line.rfind("## ", 0) == 0) in_keys = line == "## Keys";
    if (!in_keys || line.rfind("| `", 0) != 0) continue;
    const auto cells = split(line, " | ");  // key | default | meaning (the meaning may hold more)
    REQUIRE(cells.size() >= 3);
    std::vector<std::string> keys;
    for (const auto& k : split(cells[0].substr(2), ", ")) {
      std::string key = unquote_code(k);
      if (key.front() == '.') key = keys.front().substr(0, keys.front().rfind('.')) + key;
      keys.push_back(key);
    }
    const auto defaults = keys.size() == 1 ? std::vector<std::string>{cells[1]} : split(cells[1], ", ");
    INFO(line);
    REQUIRE(defaults.size() == keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      CHECK_MESSAGE(!out.count(keys[i]), "documented twice: " << keys[i]);
      out[keys[i]] = unquote_code(defaults[i]);
    }
  }
  return out;
}

// A default as a value: JSON where it parses ("0.003", "\"fp32\"", "[]"), 2^N as its number, else
// the words themselves (a default that is not a value, e.g. "config file name").
json default_value(const std::string& text) {
  static const std::regex pow2(R"(2\^(\d+))");
  std::smatch m;
  if (std::regex_match(text, m, pow2)) return std::ldexp(1.0, std::stoi(m[1]));
  const json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json("words: " + text) : j;
}

}  // namespace

TEST_CASE("docs/config.md documents every key of the schema with the schema's default") {
  const auto docs = documented_keys();
  const auto schema = config_key_docs();
  CHECK(schema.size() > 60);  // (the walk reached the sections' tables)
  for (const auto& k : schema) {
    INFO("key " << k.key << ", schema default " << k.default_text);
    CHECK_MESSAGE(docs.count(k.key), "not in docs/config.md's key table: " << k.key);
    if (docs.count(k.key)) CHECK(default_value(docs.at(k.key)) == default_value(k.default_text));
  }
}

TEST_CASE("docs/config.md's key table names no key the schema does not have") {
  std::map<std::string, bool> in_schema;
  for (const auto& k : config_key_docs()) in_schema[k.key] = true;
  for (const auto& documented : documented_keys()) {
    const std::string& key = documented.first;  // (not a structured binding: clang's doctest lambdas cannot capture one)
    CHECK_MESSAGE(in_schema.count(key), "documented but not a config key: " << key);
  }
}

TEST_CASE("the schema's defaults are what a config without keys parses to, and what config.json records") {
  const RunConfig c = parse_run_config(json::object());
  const json written = json::parse(resolved_config_json(c).dump());
  for (const auto& k : config_key_docs()) {
    std::string pointer = k.key;
    for (char& ch : pointer) ch = ch == '.' ? '/' : ch;
    const json::json_pointer at("/" + pointer);
    if (k.key == "version" || k.key == "model.vocab" || k.key == "output.name" || k.key == "precision.master") continue;
    INFO(k.key);
    REQUIRE(written.contains(at));
    CHECK(written[at] == default_value(k.default_text));
  }
  // The written config reads back to the same config.
  json back = written;
  back.erase("version");
  CHECK(json::parse(resolved_config_json(parse_run_config(back)).dump()) == written);
}

TEST_CASE("a section's unknown key lists the section's table") {
  try {
    parse_run_config(json{{"data", {{"pth", "x"}}}});
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(e.path == "data.pth");
    CHECK(e.message == "unknown key (expected one of: path, tokenizer, val_fraction)");
  }
}

}  // namespace test_config_schema
