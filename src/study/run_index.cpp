#include "study/run_index.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "io/json_read.h"

namespace drift {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json read_json_file(const fs::path& p) { return io::read_json_file(p.string(), "run file"); }

// The keys of summary.json that compare reads, with the JSON types drift writes there (null: the
// event did not happen, or a value was not finite). A file without them, or with another type, was
// not written by drift train: it is refused, naming the key, rather than shown as a row of defaults.
enum Accept : unsigned { kBool = 1, kUint = 2, kInt = 4, kNumber = 8, kString = 16, kNull = 32 };
struct SummaryKey {
  const char* key;
  unsigned accept;
  const char* expected;
};
constexpr SummaryKey kSummaryKeys[] = {
    {"diverged", kBool, "true or false"},
    {"divergence_step", kUint | kNull, "a step (integer >= 0) or null"},
    {"reason", kString | kNull, "a string or null"},
    {"first_nonfinite_step", kUint | kNull, "a step (integer >= 0) or null"},
    {"spike_step", kUint | kNull, "a step (integer >= 0) or null"},
    {"departure_step", kUint | kNull, "a step (integer >= 0) or null"},
    {"steps", kUint, "an integer >= 0"},
    {"steps_completed", kUint, "an integer >= 0"},
    {"final_train_loss", kNumber | kNull, "a number or null"},
    {"final_val_loss", kNumber | kNull, "a number or null"},
};

bool accepted(const json& v, unsigned accept) {
  return ((accept & kBool) && v.is_boolean()) || ((accept & kUint) && v.is_number_unsigned()) ||
         ((accept & kInt) && v.is_number_integer()) || ((accept & kNumber) && v.is_number()) ||
         ((accept & kString) && v.is_string()) || ((accept & kNull) && v.is_null());
}

void check_summary(const json& s, const fs::path& p) {
  if (!s.is_object()) throw io::IoError(p.string() + ": expected a JSON object (a drift run's summary)");
  for (const SummaryKey& k : kSummaryKeys) {
    if (!s.contains(k.key)) throw io::IoError(p.string() + ": missing \"" + k.key + "\" (expected " + k.expected + ")");
    if (!accepted(s[k.key], k.accept))
      throw io::IoError(p.string() + ": \"" + k.key + "\" is " + s[k.key].dump() + ", expected " + k.expected);
  }
}

double number_or_nan(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

// The runs a sweep.json lists, by canonical directory; each file is read once per process.
const std::map<std::string, json>& sweep_index(const fs::path& sweep_dir) {
  static std::map<std::string, std::map<std::string, json>> cache;
  const std::string key = fs::weakly_canonical(sweep_dir).string();
  auto [it, fresh] = cache.try_emplace(key);
  if (fresh) {
    const json s = read_json_file(sweep_dir / "sweep.json");
    if (s.contains("runs") && s["runs"].is_array())
      for (const auto& r : s["runs"])
        if (r.contains("dir") && r["dir"].is_string())
          it->second[fs::weakly_canonical(sweep_dir / r["dir"].get<std::string>()).string()] = r;
  }
  return it->second;
}

// The entry of a sweep.json in one of `dir`'s parents that lists `dir`, if any.
std::optional<json> sweep_entry_for(const fs::path& dir) {
  const std::string run = fs::weakly_canonical(dir).string();
  fs::path p = fs::weakly_canonical(dir).parent_path();
  for (int up = 0; up < 6 && !p.empty(); ++up, p = p.parent_path()) {
    if (fs::exists(p / "sweep.json")) {
      const auto& index = sweep_index(p);
      const auto it = index.find(run);
      if (it != index.end()) return it->second;
    }
    if (p == p.root_path()) break;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> find_run_dirs(const std::vector<std::string>& paths) {
  std::set<std::string> found;
  for (const auto& path : paths) {
    if (!fs::is_directory(path)) throw std::runtime_error(path + ": no such directory");
    if (fs::exists(fs::path(path) / "summary.json")) {
      found.insert(fs::path(path).lexically_normal().string());
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied);
         it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory() && fs::exists(it->path() / "summary.json")) {
        found.insert(it->path().lexically_normal().string());
        it.disable_recursion_pending();  // a run directory holds no runs
      }
    }
  }
  return {found.begin(), found.end()};
}

std::array<double, 3> mean_clip_rates(const std::vector<json>& lines) {
  std::array<double, 3> sum = {0, 0, 0};
  std::array<size_t, 3> n = {0, 0, 0};
  for (const auto& l : lines) {
    if (!l.contains("classes") || !l["classes"].is_object()) continue;
    for (size_t c = 0; c < kTensorClasses.size(); ++c) {
      const json& cl = l["classes"].contains(kTensorClasses[c]) ? l["classes"][kTensorClasses[c]] : json();
      if (!cl.is_object() || !cl.contains("elements") || !cl.contains("clipped") || !cl["elements"].is_number() ||
          !cl["clipped"].is_number())
        continue;
      const double elements = cl["elements"].get<double>();
      if (!(elements > 0)) continue;
      sum[c] += cl["clipped"].get<double>() / elements;
      ++n[c];
    }
  }
  std::array<double, 3> mean;
  for (size_t c = 0; c < 3; ++c) mean[c] = n[c] ? sum[c] / static_cast<double>(n[c]) : NAN;
  return mean;
}

double mean_clip_rate_under(const std::vector<json>& lines, const char* key) {
  double sum = 0;
  size_t n = 0;
  for (const auto& l : lines) {
    if (!l.contains(key) || !l[key].is_object()) continue;
    double elements = 0, clipped = 0;
    for (const auto& [name, q] : l[key].items())
      if (q.is_object() && q.contains("elements") && q.contains("clipped"))
        elements += q["elements"].get<double>(), clipped += q["clipped"].get<double>();
    if (elements > 0) sum += clipped / elements, ++n;
  }
  return n ? sum / static_cast<double>(n) : NAN;
}

namespace {

// Per site, the mean over lines of each operand's clipped / elements.
std::map<std::string, std::array<double, 2>> site_clip_rates(const std::vector<json>& lines) {
  std::map<std::string, std::array<std::pair<double, size_t>, 2>> acc;
  for (const auto& l : lines) {
    if (!l.contains("sites") || !l["sites"].is_object()) continue;
    for (const auto& [site, ops] : l["sites"].items())
      for (size_t k = 0; k < 2; ++k) {
        const char* op = k ? "b" : "a";
        if (!ops.is_object() || !ops.contains(op)) continue;
        const json& q = ops[op];
        const double e = q.value("elements", 0.0);
        if (e > 0) acc[site][k].first += q.value("clipped", 0.0) / e, ++acc[site][k].second;
      }
  }
  std::map<std::string, std::array<double, 2>> out;
  for (const auto& [site, a] : acc)
    for (size_t k = 0; k < 2; ++k) out[site][k] = a[k].second ? a[k].first / static_cast<double>(a[k].second) : NAN;
  return out;
}

// The JSON lines of a run's metrics.jsonl or diag.jsonl (none when the file does not exist), each
// an object; read through the input layer (a regular file, bounded; a bad line named).
std::vector<json> read_lines(const fs::path& file) {
  std::vector<json> lines;
  std::error_code ec;
  if (!fs::exists(file, ec)) return lines;
  const std::string text = io::read_regular_file(file.string(), "run's metrics", io::kMaxDataBytes);
  for (const io::TextLine& l : io::split_lines(text)) {
    const std::string where = file.string() + " line " + std::to_string(l.number);
    json j = io::parse_json(l.text, where);
    if (!j.is_object()) throw io::IoError(where + ": expected a JSON object");
    lines.push_back(std::move(j));
  }
  return lines;
}

// diag.jsonl's means (RunRecord::diag_*).
void summarise_diag(const std::vector<json>& lines, RunRecord& r) {
  std::array<double, 3> sum = {0, 0, 0};
  std::array<size_t, 3> n = {0, 0, 0};
  const char* keys[3] = {"cosine", "rel_error", "bias"};
  for (const auto& l : lines) {
    if (l.contains("grad") && l["grad"].is_object() && l["grad"].contains("overall"))
      for (size_t k = 0; k < 3; ++k)
        if (l["grad"]["overall"].contains(keys[k]) && l["grad"]["overall"][keys[k]].is_number())
          sum[k] += l["grad"]["overall"][keys[k]].get<double>(), ++n[k];
    if (l.contains("bound_violations") && l["bound_violations"].is_number_unsigned())
      r.bound_violations = r.bound_violations.value_or(0) + l["bound_violations"].get<uint64_t>();
  }
  double* out[3] = {&r.diag_cosine, &r.diag_rel_error, &r.diag_bias};
  for (size_t k = 0; k < 3; ++k) *out[k] = n[k] ? sum[k] / static_cast<double>(n[k]) : NAN;
}

}  // namespace

std::string sweep_run_label(const json& entry, const std::string& fallback) {
  std::string label = entry.contains("policy") && entry["policy"].is_string() && !entry["policy"].get<std::string>().empty()
                          ? entry["policy"].get<std::string>()
                          : fallback;
  if (entry.contains("varying") && entry["varying"].is_object())
    for (auto it = entry["varying"].begin(); it != entry["varying"].end(); ++it)
      label += " " + it.key() + "=" + (it.value().is_string() ? it.value().get<std::string>() : it.value().dump());
  return label;
}

RunRecord read_run(const std::string& dir) {
  const fs::path d(dir);
  RunRecord r;
  r.dir = dir;
  const json s = read_json_file(d / "summary.json");
  check_summary(s, d / "summary.json");
  r.config = read_json_file(d / "config.json");
  if (!r.config.is_object()) throw io::IoError((d / "config.json").string() + ": expected a JSON object (a drift run's config)");
  if (r.config.contains("seed") && !r.config["seed"].is_number_unsigned())
    throw io::IoError((d / "config.json").string() + ": \"seed\" is " + r.config["seed"].dump() + ", expected an integer >= 0");
  r.seed = r.config.value("seed", uint64_t{0});
  r.diverged = s["diverged"].get<bool>();
  if (s["divergence_step"].is_number()) r.divergence_step = s["divergence_step"].get<int64_t>();
  if (s["reason"].is_string()) r.reason = s["reason"].get<std::string>();
  for (auto [key, field] : {std::pair{"first_nonfinite_step", &r.first_nonfinite_step}, std::pair{"spike_step", &r.spike_step},
                            std::pair{"departure_step", &r.departure_step}})
    if (s[key].is_number()) *field = s[key].get<int64_t>();
  r.steps = s["steps"].get<uint64_t>();
  r.steps_completed = s["steps_completed"].get<uint64_t>();
  r.final_train_loss = number_or_nan(s, "final_train_loss");
  r.final_val_loss = number_or_nan(s, "final_val_loss");

  std::string name = "run";
  if (r.config.contains("output") && r.config["output"].is_object() && r.config["output"].contains("name") &&
      r.config["output"]["name"].is_string())
    name = r.config["output"]["name"].get<std::string>();
  const auto entry = sweep_entry_for(d);
  r.label = entry ? sweep_run_label(*entry, name) : name;
  // A bisect's runs (repeat1, fp32_baseline, restore-forward, ...) are named by their directory.
  if (!entry && fs::exists(d.parent_path() / "bisect.json")) r.label = name + " " + d.filename().string();

  const std::vector<json> lines = read_lines(d / "metrics.jsonl");
  r.clip_rate = mean_clip_rates(lines);
  r.elementwise_clip_rate = mean_clip_rate_under(lines, "elementwise");
  r.site_clip_rate = site_clip_rates(lines);
  for (const auto& l : lines)
    if (l.contains("step") && l["step"].is_number_unsigned())
      r.loss_at[l["step"].get<uint64_t>()] = l.contains("loss") && l["loss"].is_number() ? l["loss"].get<double>() : NAN;
  if (fs::exists(d / "diag.jsonl")) summarise_diag(read_lines(d / "diag.jsonl"), r);
  return r;
}

}  // namespace drift
