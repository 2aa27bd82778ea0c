#include "study/sweep_plan.h"
#include "io/json_read.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace drift {

using json = nlohmann::json;

namespace {

uint64_t parse_seed(const std::string& s, const std::string& spec) {
  uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw SweepError("--seeds: '" + s + "' is not a seed (expected e.g. 1-8, 1,3,5 or 1-3,7) in '" + spec + "'");
  return v;
}

// Leaf assignments that merge `overlay` into the config at `path` key by key (objects recurse,
// anything else, lists included, replaces).
void flatten(const json& overlay, const std::string& path, std::vector<std::string>& out) {
  if (overlay.is_object() && !overlay.empty()) {
    for (auto it = overlay.begin(); it != overlay.end(); ++it)
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
    return;
  }
  out.push_back(path + "=" + overlay.dump());
}

bool is_config_overlay(const json& j) {
  for (const char* k : {"seed", "model", "data", "train", "precision", "divergence", "output"})
    if (j.contains(k)) return true;
  return false;
}

}  // namespace

std::vector<uint64_t> parse_seed_list(const std::string& spec) {
  std::vector<uint64_t> seeds;
  std::set<uint64_t> seen;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    if (item.empty()) throw SweepError("--seeds: empty item in '" + spec + "'");
    const size_t dash = item.find('-');
    uint64_t lo = 0, hi = 0;
    if (dash == std::string::npos) {
      lo = hi = parse_seed(item, spec);
    } else {
      lo = parse_seed(item.substr(0, dash), spec);
      hi = parse_seed(item.substr(dash + 1), spec);
      if (hi < lo) throw SweepError("--seeds: range '" + item + "' runs backwards");
    }
    if (hi - lo >= kMaxSweepSeeds || seeds.size() + (hi - lo) >= kMaxSweepSeeds)
      throw SweepError("--seeds: more than " + std::to_string(kMaxSweepSeeds) + " seeds in '" + spec + "'");
    for (uint64_t s = lo;; ++s) {
      if (!seen.insert(s).second) throw SweepError("--seeds: seed " + std::to_string(s) + " appears twice in '" + spec + "'");
      seeds.push_back(s);
      if (s == hi) break;
    }
    start = comma + 1;
  }
  return seeds;
}

std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  parts.push_back(cur);
  return parts;
}

SweepSet parse_sweep_set(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw SweepError("--set expects key=v1,v2,... (e.g. train.lr=0.01,0.03), got '" + arg + "'");
  SweepSet s;
  s.key = arg.substr(0, eq);
  s.values = split_top_level(arg.substr(eq + 1));
  std::set<std::string> seen;
  for (const auto& v : s.values) {
    if (v.empty()) throw SweepError("--set " + s.key + ": empty value in '" + arg + "'");
    if (!seen.insert(v).second) throw SweepError("--set " + s.key + ": value '" + v + "' appears twice");
  }
  return s;
}

SweepPolicy policy_from_json(const json& j, const std::string& label, const std::string& file) {
  SweepPolicy p;
  p.label = safe_segment(label);
  p.file = file;
  if (j.is_array() || j.is_string()) {
    p.sets.push_back("precision=" + json{{"matmul", j}}.dump());
  } else if (j.is_object() && is_config_overlay(j)) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "precision") {
        if (!it.value().is_object())
          throw SweepError(file + ": \"precision\" must be an object (the precision section)");
        p.sets.push_back("precision=" + it.value().dump());
      } else {
        flatten(it.value(), it.key(), p.sets);
      }
    }
  } else if (j.is_object()) {
    p.sets.push_back("precision=" + j.dump());
  } else {
    throw SweepError(file + ": expected a list of matmul rules, a precision section, a config overlay or a preset name");
  }
  return p;
}

SweepPolicy load_policy_file(const std::string& path) {
  json j;
  try {
    j = io::read_json_file(path, "policy file");
  } catch (const io::IoError& e) {
    throw SweepError(std::string("--policies: ") + e.what());
  }
  return policy_from_json(j, std::filesystem::path(path).stem().string(), path);
}

std::string safe_segment(const std::string& text) {
  std::string s;
  for (unsigned char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '=' || c == ',' || c == '+' || c == '-';
    s += ok ? static_cast<char>(c) : '_';
  }
  if (s.empty() || s[0] == '.') s = "_" + s;
  if (s.size() > 120) s.resize(120);
  return s;
}

std::vector<PlannedRun> plan_sweep(const std::vector<uint64_t>& seeds, const std::vector<SweepSet>& sets,
                                   const std::vector<SweepPolicy>& policies, const std::string& base_label) {
  std::vector<SweepPolicy> pols = policies;
  if (pols.empty()) pols.push_back(SweepPolicy{safe_segment(base_label), "", {}});
  std::set<std::string> labels;
  for (const auto& p : pols)
    if (!labels.insert(p.label).second)
      throw SweepError("--policies: two policy files have the label '" + p.label + "' (the file stem): rename one");
  std::set<std::string> keys;
  for (const auto& s : sets)
    if (!keys.insert(s.key).second) throw SweepError("--set " + s.key + ": given twice (list its values in one --set)");

  std::vector<PlannedRun> runs;
  std::map<std::string, std::string> dir_of;  // rel_dir -> description, to catch collisions
  std::vector<size_t> idx(sets.size(), 0);
  for (const auto& pol : pols) {
    std::fill(idx.begin(), idx.end(), 0);
    while (true) {
      std::vector<std::pair<std::string, std::string>> overrides, varying;
      std::string combo;
      for (size_t i = 0; i < sets.size(); ++i) {
        overrides.emplace_back(sets[i].key, sets[i].values[idx[i]]);
        if (sets[i].values.size() < 2) continue;
        varying.emplace_back(sets[i].key, sets[i].values[idx[i]]);
        combo += (combo.empty() ? "" : ",") + sets[i].key + "=" + sets[i].values[idx[i]];
      }
      for (uint64_t seed : seeds) {
        PlannedRun r;
        r.seed = seed;
        r.policy = policies.empty() ? "" : pol.label;
        r.overrides = overrides;
        r.varying = varying;
        r.sets = pol.sets;
        for (const auto& [k, v] : overrides) r.sets.push_back(k + "=" + v);
        r.rel_dir = pol.label + "/" + (combo.empty() ? "" : safe_segment(combo) + "/") + "seed" + std::to_string(seed);
        const std::string what = pol.label + " " + combo + " seed " + std::to_string(seed);
        const auto [it, fresh] = dir_of.emplace(r.rel_dir, what);
        if (!fresh)
          throw SweepError("runs '" + it->second + "' and '" + what + "' would share the directory " + r.rel_dir +
                           " (values differ only in characters that are not filesystem-safe)");
        runs.push_back(std::move(r));
      }
      // Next combination: the last --set varies fastest.
      size_t i = sets.size();
      while (i > 0) {
        --i;
        if (++idx[i] < sets[i].values.size()) break;
        idx[i] = 0;
        if (i == 0) { i = sets.size() + 1; break; }
      }
      if (sets.empty() || i == sets.size() + 1) break;
    }
  }
  return runs;
}

}  // namespace drift
