#include "study/step_table.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "study/compare_render.h"

namespace drift {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// The counts that become rates, and the rate's name.
constexpr std::pair<const char*, const char*> kRates[] = {
    {"clipped", "clip_rate"}, {"flushed", "flush_rate"}, {"subnormal", "subnormal_rate"}};

// The key of one element of an array: its "name" when it has one (diag.jsonl's probes), else its index.
std::string element_key(const ojson& e, size_t i) {
  if (e.is_object() && e.contains("name") && e["name"].is_string()) return e["name"].get<std::string>();
  return std::to_string(i);
}

void flatten(StepTable& t, std::map<size_t, nlohmann::json>& row, const ojson& v, const std::string& name) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() == "name" && it.value().is_string()) continue;  // it names the element (element_key)
      flatten(t, row, it.value(), name.empty() ? it.key() : name + "." + it.key());
    }
    if (v.contains("elements") && v["elements"].is_number()) {
      const double elements = v["elements"].get<double>();
      for (const auto& [count, rate] : kRates)
        if (v.contains(count) && v[count].is_number())
          row[t.column(name + "." + rate)] = elements > 0 ? nlohmann::json(v[count].get<double>() / elements) : nullptr;
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) flatten(t, row, v[i], name + "." + element_key(v[i], i));
  } else {
    row[t.column(name)] = nlohmann::json::parse(v.dump());  // the scalar as it stands (null stays null)
  }
}

}  // namespace

size_t StepTable::column(const std::string& name) {
  const auto [it, fresh] = index_.try_emplace(name, columns.size());
  if (fresh) columns.push_back(name);
  return it->second;
}

void StepTable::add_line(const ojson& line, const std::string& prefix) {
  if (!line.is_object() || !line.contains("step") || !line["step"].is_number_unsigned())
    throw std::runtime_error("a line without a \"step\"");
  const uint64_t step = line["step"].get<uint64_t>();
  auto& row = rows[step];
  row[column("step")] = step;
  for (auto it = line.begin(); it != line.end(); ++it)
    if (it.key() != "step") flatten(*this, row, it.value(), prefix + it.key());
}

std::vector<ojson> read_jsonl(const std::string& path) {
  std::vector<ojson> lines;
  std::ifstream f(path);
  if (!f) return lines;
  std::string line;
  for (size_t n = 1; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    try {
      lines.push_back(ojson::parse(line));
    } catch (const ojson::parse_error&) {
      throw std::runtime_error(path + ":" + std::to_string(n) + ": not valid JSON");
    }
  }
  return lines;
}

std::string step_table_csv(const StepTable& t) {
  std::string out;
  for (size_t c = 0; c < t.columns.size(); ++c) out += (c ? "," : "") + csv_field(t.columns[c]);
  out += "\n";
  for (const auto& [step, row] : t.rows) {
    for (size_t c = 0; c < t.columns.size(); ++c) {
      if (c) out += ",";
      const auto it = row.find(c);
      if (it == row.end() || it->second.is_null()) continue;
      out += it->second.is_string() ? csv_field(it->second.get<std::string>()) : it->second.dump();
    }
    out += "\n";
  }
  return out;
}

std::string step_table_jsonl(const StepTable& t) {
  std::string out;
  for (const auto& [step, row] : t.rows) {
    ojson line = ojson::object();
    for (size_t c = 0; c < t.columns.size(); ++c) {
      const auto it = row.find(c);
      line[t.columns[c]] = it == row.end() ? ojson(nullptr) : ojson::parse(it->second.dump());
    }
    out += line.dump() + "\n";
  }
  return out;
}

StepTable read_step_table(const std::string& run_dir) {
  StepTable t;
  t.column("step");
  for (const auto& [file, prefix] : {std::pair{"metrics.jsonl", ""}, std::pair{"diag.jsonl", "diag."}}) {
    const std::string path = (fs::path(run_dir) / file).string();
    size_t n = 0;
    for (const auto& line : read_jsonl(path)) {
      ++n;
      try {
        t.add_line(line, prefix);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(path + ": line " + std::to_string(n) + ": " + e.what());
      }
    }
  }
  return t;
}

}  // namespace drift
