#include "study/compare.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace drift {

using json = nlohmann::json;

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

json identity_json(const RunRecord& r, GroupBy by) {
  if (by == GroupBy::precision) return r.config.contains("precision") ? r.config["precision"] : json();
  json c = r.config;
  for (const char* k : {"seed", "output", "version"}) c.erase(k);
  return c;
}

// The mean of the values that are not NaN; NaN for none.
double mean_of(const std::vector<double>& v) {
  double sum = 0;
  size_t n = 0;
  for (double x : v)
    if (!std::isnan(x)) sum += x, ++n;
  return n ? sum / static_cast<double>(n) : NAN;
}

// NaN-aware "less": numbers before NaN.
int cmp_nan_last(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) - std::isnan(b);
  return a < b ? -1 : (a > b ? 1 : 0);
}

PolicyRow make_row(std::string label, std::vector<const RunRecord*> runs) {
  PolicyRow row;
  row.label = std::move(label);
  std::stable_sort(runs.begin(), runs.end(), [](const RunRecord* a, const RunRecord* b) {
    return a->seed != b->seed ? a->seed < b->seed : a->dir < b->dir;
  });
  row.runs = std::move(runs);
  row.seeds = row.runs.size();
  std::vector<double> steps, train, val;
  std::array<std::vector<double>, 3> clip;
  for (const RunRecord* r : row.runs) {
    if (r->diverged) {
      ++row.diverged;
      if (r->divergence_step) steps.push_back(static_cast<double>(*r->divergence_step));
    } else {
      train.push_back(r->final_train_loss);
      val.push_back(r->final_val_loss);
    }
    for (size_t c = 0; c < 3; ++c) clip[c].push_back(r->clip_rate[c]);
  }
  row.median_divergence_step = median(steps);
  auto min_max = [](const std::vector<double>& v, double* lo, double* hi) {
    for (double x : v)
      if (!std::isnan(x)) *lo = std::isnan(*lo) ? x : std::min(*lo, x), *hi = std::isnan(*hi) ? x : std::max(*hi, x);
  };
  min_max(val, &row.min_val_loss, &row.max_val_loss);
  min_max(steps, &row.min_divergence_step, &row.max_divergence_step);
  std::vector<double> elementwise, cosine, rel_error, bias;
  for (const RunRecord* r : row.runs) {
    elementwise.push_back(r->elementwise_clip_rate);
    cosine.push_back(r->diag_cosine);
    rel_error.push_back(r->diag_rel_error);
    bias.push_back(r->diag_bias);
    if (r->bound_violations) row.bound_violations = row.bound_violations.value_or(0) + *r->bound_violations;
  }
  row.elementwise_clip_rate = mean_of(elementwise);
  row.diag_cosine = mean_of(cosine);
  row.diag_rel_error = mean_of(rel_error);
  row.diag_bias = mean_of(bias);
  row.median_train_loss = median(train);
  row.median_val_loss = median(val);
  for (size_t c = 0; c < 3; ++c) row.clip_rate[c] = mean_of(clip[c]);
  return row;
}

// The value at a JSON pointer of `j`, as text, for telling two configs apart.
std::string value_at(const json& j, const std::string& pointer) {
  try {
    const json& v = j.at(json::json_pointer(pointer));
    std::string t = v.is_string() ? v.get<std::string>() : v.dump();
    if (t.size() > 40) t = t.substr(0, 37) + "...";  // a label, not the whole rule list
    return t;
  } catch (const std::exception&) {
    return "(absent)";
  }
}

}  // namespace

double median_loss_at(const PolicyRow& row, uint64_t step) {
  std::vector<double> v;
  for (const RunRecord* r : row.runs)
    if (const auto it = r->loss_at.find(step); it != r->loss_at.end()) v.push_back(std::isnan(it->second) ? INFINITY : it->second);
  return median(v);
}

std::array<double, 2> mean_site_clip_rate(const PolicyRow& row, const std::string& site) {
  std::array<std::vector<double>, 2> v;
  for (const RunRecord* r : row.runs)
    if (const auto it = r->site_clip_rate.find(site); it != r->site_clip_rate.end())
      v[0].push_back(it->second[0]), v[1].push_back(it->second[1]);
  return {mean_of(v[0]), mean_of(v[1])};
}

std::string policy_identity(const RunRecord& r, GroupBy by) { return identity_json(r, by).dump(); }

bool survives_better(const PolicyRow& a, const PolicyRow& b) {
  // a.diverged / a.seeds < b.diverged / b.seeds, exactly (cross-multiplied integers).
  const size_t lhs = a.diverged * std::max<size_t>(b.seeds, 1), rhs = b.diverged * std::max<size_t>(a.seeds, 1);
  if (lhs != rhs) return lhs < rhs;
  if (int c = cmp_nan_last(b.median_divergence_step, a.median_divergence_step)) return c < 0;  // later first
  if (int c = cmp_nan_last(a.median_val_loss, b.median_val_loss)) return c < 0;
  return a.label < b.label;
}

std::vector<PolicyRow> group_by_policy(const std::vector<RunRecord>& runs, GroupBy by) {
  // Groups in order of first appearance, keyed by identity.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const RunRecord*>> groups;
  for (const auto& r : runs) {
    const std::string id = policy_identity(r, by);
    auto [it, fresh] = groups.try_emplace(id);
    if (fresh) order.push_back(id);
    it->second.push_back(&r);
  }
  // Labels: the first run's; where two groups share one, name the first config key that differs.
  std::vector<std::string> labels;
  for (const auto& id : order) labels.push_back(groups[id].front()->label);
  std::vector<std::string> final_labels = labels;
  for (size_t i = 0; i < order.size(); ++i) {
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == i || labels[k] != labels[i]) continue;
      const json a = identity_json(*groups[order[k]].front(), by), b = identity_json(*groups[order[i]].front(), by);
      const json patch = json::diff(a, b);
      if (patch.empty()) continue;
      const std::string ptr = patch[0]["path"].get<std::string>();
      final_labels[i] = labels[i] + " [" + ptr + "=" + value_at(b, ptr) + "]";
      break;
    }
  }
  std::vector<PolicyRow> rows;
  for (size_t i = 0; i < order.size(); ++i) rows.push_back(make_row(final_labels[i], groups[order[i]]));
  std::stable_sort(rows.begin(), rows.end(), survives_better);
  return rows;
}

}  // namespace drift
