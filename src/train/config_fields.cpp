#include "train/config_fields.h"

#include <cmath>
#include <sstream>

#include "policy/json_keys.h"

namespace drift {

using json = nlohmann::json;

namespace {

std::string comma_list(const std::vector<std::string>& items) {
  std::string list;
  for (const auto& s : items) list += (list.empty() ? "" : ", ") + s;
  return list;
}

bool non_negative_int(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

}  // namespace

std::string key_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string number_text(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

uint64_t read_integer(const json& v, const std::string& path, uint64_t lo, uint64_t hi) {
  std::string range = "[";
  range += std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!non_negative_int(v)) throw ConfigError(path, "expected an integer in " + range);
  const uint64_t x = v.get<uint64_t>();
  if (x < lo || x > hi) throw ConfigError(path, "expected an integer in " + range + ", got " + std::to_string(x));
  return x;
}

uint64_t read_seed(const json& v, const std::string& path) {
  if (!non_negative_int(v)) throw ConfigError(path, "expected an integer >= 0");
  return v.get<uint64_t>();
}

double read_number(const json& v, const std::string& path, double lo, double hi, bool open_lo, bool open_hi) {
  const std::string range =
      std::string(open_lo ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + (open_hi ? ")" : "]");
  if (!v.is_number()) throw ConfigError(path, "expected a number in " + range);
  const double x = v.get<double>();
  if (!std::isfinite(x) || (open_lo ? x <= lo : x < lo) || (open_hi ? x >= hi : x > hi))
    throw ConfigError(path, "expected a number in " + range + ", got " + number_text(x));
  return x;
}

bool read_flag(const json& v, const std::string& path) {
  if (!v.is_boolean()) throw ConfigError(path, "expected true or false");
  return v.get<bool>();
}

std::string read_text(const json& v, const std::string& path, const std::vector<std::string>& choices) {
  const std::string list = comma_list(choices);
  if (!v.is_string()) throw ConfigError(path, choices.empty() ? "expected a string" : "expected one of: " + list);
  const std::string s = v.get<std::string>();
  bool ok = choices.empty();
  for (const auto& c : choices) ok = ok || s == c;
  if (!ok) throw ConfigError(path, "unknown value '" + s + "' (expected one of: " + list + ")");
  return s;
}

void check_known_keys(const json& j, const std::string& path, const std::vector<std::string>& keys) {
  if (!j.is_object()) throw ConfigError(path, "expected an object");
  reject_unknown_keys(j, path, keys);
}

}  // namespace drift
