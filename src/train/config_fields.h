// The machinery of the config schema (train/config_schema.h): a config section is a table of
// fields, and one table drives everything a key needs: how its value is read and checked (with the
// error naming the key's path), its default (the struct member's initializer), the "unknown key"
// error of its section, how it is written to the resolved config.json, and the key list that
// docs/config.md must document (tests/test_config_schema.cpp).
//
// A field is a scalar (integer, seed, number, flag, text, choice: read and written by the table
// alone), a sub-section (its own table), or a custom key (a list or a shape of its own, read and
// written by functions beside the table).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policy/config_error.h"

namespace drift {

// A key as docs/config.md lists it: its dotted path and its default as JSON text.
struct KeyDoc {
  std::string key;           // e.g. "train.lr"
  std::string default_text;  // e.g. "0.003"; a field may say it in words ("config file name")
};

template <class S>
struct Field {
  std::string key;
  // Reads the key's value `v` (present in the document at `path`) into `s`. Throws ConfigError.
  std::function<void(const nlohmann::json& v, const std::string& path, S& s)> read;
  // The value as the resolved config.json records it.
  std::function<nlohmann::ordered_json(const S& s)> write;
  // A section's keys (prefixed "<path>."); empty for a key docs/config.md lists as one row.
  std::function<std::vector<KeyDoc>(const std::string& path)> keys;
  // The default as docs/config.md shows it, where that is not the JSON of write(S()).
  std::string doc_default;
  // A section is read (from {}) when absent too, so that the checks across its keys always run.
  bool read_when_absent = false;
};

// "a.b" from "a" and "b" ("b" at the root).
std::string key_path(const std::string& parent, const std::string& key);

// The checked values of the scalar kinds; each throws ConfigError at `path` with the expected
// range or choices ("expected an integer in [1, 4096], got 0").
uint64_t read_integer(const nlohmann::json& v, const std::string& path, uint64_t lo, uint64_t hi);
uint64_t read_seed(const nlohmann::json& v, const std::string& path);  // any integer >= 0
// lo/hi inclusive unless open_lo (x > lo) / open_hi (x < hi).
double read_number(const nlohmann::json& v, const std::string& path, double lo, double hi, bool open_lo, bool open_hi);
bool read_flag(const nlohmann::json& v, const std::string& path);
std::string read_text(const nlohmann::json& v, const std::string& path, const std::vector<std::string>& choices = {});

// Throws ConfigError at "<path>.<key>" for a key of `j` that is not in `keys` ("unknown key
// (expected one of: a, b)"), and at `path` when `j` is not an object.
void check_known_keys(const nlohmann::json& j, const std::string& path, const std::vector<std::string>& keys);

// A number's shortest text ("0.003", "1e+30"), as range messages print it.
std::string number_text(double x);

// ---- the kinds of field ----

template <class S>
Field<S> make_field(std::string key, decltype(Field<S>::read) read, decltype(Field<S>::write) write) {
  Field<S> f;
  f.key = std::move(key);
  f.read = std::move(read);
  f.write = std::move(write);
  return f;
}

// A member read by `check(value, path)` (which throws ConfigError) and recorded as it is.
template <class S, class T, class Check>
Field<S> scalar(const char* key, T S::*m, Check check) {
  return make_field<S>(
      key, [=](const nlohmann::json& v, const std::string& p, S& s) { s.*m = static_cast<T>(check(v, p)); },
      [=](const S& s) { return nlohmann::ordered_json(s.*m); });
}

template <class S, class T>
Field<S> integer(const char* key, T S::*m, uint64_t lo, uint64_t hi = std::numeric_limits<uint32_t>::max()) {
  return scalar(key, m, [=](const nlohmann::json& v, const std::string& p) { return read_integer(v, p, lo, hi); });
}

template <class S>
Field<S> seed(const char* key, uint64_t S::*m) {
  return scalar(key, m, read_seed);
}

// lo/hi inclusive unless open_lo / open_hi (as read_number).
template <class S>
Field<S> number(const char* key, double S::*m, double lo, double hi, bool open_lo = false, bool open_hi = false) {
  return scalar(key, m, [=](const nlohmann::json& v, const std::string& p) {
    return read_number(v, p, lo, hi, open_lo, open_hi);
  });
}

template <class S>
Field<S> flag(const char* key, bool S::*m) {
  return scalar(key, m, read_flag);
}

// A string; with `choices`, one of them.
template <class S>
Field<S> text(const char* key, std::string S::*m, std::vector<std::string> choices = {}) {
  return scalar(key, m, [=](const nlohmann::json& v, const std::string& p) { return read_text(v, p, choices); });
}

// A key read and written by hand (a list, or a value of more than one shape).
template <class S>
Field<S> custom(const char* key, std::function<void(const nlohmann::json&, const std::string&, S&)> read,
                std::function<nlohmann::ordered_json(const S&)> write, std::string doc_default = "") {
  Field<S> f = make_field<S>(key, std::move(read), std::move(write));
  f.doc_default = std::move(doc_default);
  return f;
}

// The field, its default shown in docs/config.md as `text` (where it is not a JSON value).
template <class S>
Field<S> documented_as(Field<S> f, std::string text) {
  f.doc_default = std::move(text);
  return f;
}

// ---- tables ----

template <class S>
std::vector<std::string> field_keys(const std::vector<Field<S>>& table) {
  std::vector<std::string> keys;
  for (const auto& f : table) keys.push_back(f.key);
  return keys;
}

// Reads the object `j` at `path` into `s`: unknown keys are errors, absent keys keep s's values.
template <class S>
void read_fields(const nlohmann::json& j, const std::string& path, const std::vector<Field<S>>& table, S& s) {
  check_known_keys(j, path, field_keys(table));
  static const nlohmann::json empty = nlohmann::json::object();
  for (const auto& f : table) {
    if (j.contains(f.key))
      f.read(j[f.key], key_path(path, f.key), s);
    else if (f.read_when_absent)
      f.read(empty, key_path(path, f.key), s);
  }
}

template <class S>
nlohmann::ordered_json write_fields(const std::vector<Field<S>>& table, const S& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& f : table) j[f.key] = f.write(s);
  return j;
}

// Every key of the table (sections expanded) with its default: the values of S().
template <class S>
std::vector<KeyDoc> field_docs(const std::vector<Field<S>>& table, const std::string& path) {
  std::vector<KeyDoc> out;
  const S defaults{};
  for (const auto& f : table) {
    const std::string p = key_path(path, f.key);
    if (f.keys) {
      for (auto& k : f.keys(p)) out.push_back(std::move(k));
      continue;
    }
    out.push_back({p, f.doc_default.empty() ? f.write(defaults).dump() : f.doc_default});
  }
  return out;
}

// A sub-section: the member `m` of S, itself read and written by `table`; `check` runs after its
// keys are read (the checks across keys), with the section's JSON.
template <class S, class T>
Field<S> section(const char* key, T S::*m, const std::vector<Field<T>>& (*table)(),
                 void (*check)(const nlohmann::json&, T&) = nullptr, bool read_when_absent = true) {
  Field<S> f = make_field<S>(
      key,
      [=](const nlohmann::json& v, const std::string& p, S& s) {
        read_fields(v, p, table(), s.*m);
        if (check) check(v, s.*m);
      },
      [=](const S& s) { return write_fields(table(), s.*m); });
  f.keys = [=](const std::string& p) { return field_docs(table(), p); };
  f.read_when_absent = read_when_absent;
  return f;
}

}  // namespace drift
