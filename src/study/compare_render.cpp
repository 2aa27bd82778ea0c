#include "study/compare_render.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "io/json_number.h"

namespace drift {

using ojson = nlohmann::ordered_json;
using io::finite_or_null;

namespace {

const char* const kDash = "\u2014";

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Shortest decimal that reads back to the same double; "" for NaN (an empty CSV field).
std::string shortest(double x) {
  if (std::isnan(x)) return "";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

ojson step_json(const std::optional<int64_t>& s) { return s ? ojson(*s) : ojson(nullptr); }

std::string seed_cell(const RunRecord& r) {
  if (r.diverged) return r.divergence_step ? "div " + std::to_string(*r.divergence_step) : std::string("div");
  return fmt_loss(r.final_val_loss);
}

template <class F>
bool any_of(const std::vector<PolicyRow>& rows, F f) {
  return std::any_of(rows.begin(), rows.end(), f);
}

// A diagnostic ratio (cosine, relative error, bias): 4 significant digits.
std::string fmt_ratio(double x) {
  if (std::isnan(x)) return kDash;
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", x);
  return b;
}

std::vector<uint64_t> all_seeds(const std::vector<PolicyRow>& rows) {
  std::vector<uint64_t> seeds;
  for (const auto& row : rows)
    for (const RunRecord* r : row.runs) seeds.push_back(r->seed);
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  return seeds;
}

std::string divergence_list(const PolicyRow& row, const char* sep) {
  std::string s;
  for (const RunRecord* r : row.runs)
    if (r->diverged && r->divergence_step) s += (s.empty() ? "" : sep) + std::to_string(*r->divergence_step);
  return s;
}

}  // namespace

std::vector<std::vector<std::string>> policy_table_cells(const std::vector<PolicyRow>& rows, const CompareColumns& columns) {
  const bool elementwise = any_of(rows, [](const PolicyRow& r) { return !std::isnan(r.elementwise_clip_rate); });
  const bool diag = any_of(rows, [](const PolicyRow& r) { return !std::isnan(r.diag_cosine) || r.bound_violations; });
  std::vector<std::string> head = {"policy", "seeds", "diverged", "divergence steps", "median div. step", "div. step range",
                                   "median train loss", "median val loss", "val loss range", "clip act", "clip weight",
                                   "clip grad"};
  if (elementwise) head.push_back("clip elementwise");
  if (columns.loss_at_step) head.push_back("loss at " + std::to_string(*columns.loss_at_step));
  for (const auto& site : columns.sites) head.insert(head.end(), {"clip " + site + ".a", "clip " + site + ".b"});
  if (diag) head.insert(head.end(), {"grad cosine", "grad rel. error", "grad bias", "bound violations"});
  std::vector<std::vector<std::string>> g = {head};
  for (const auto& row : rows) {
    const std::string steps = divergence_list(row, ", ");
    std::vector<std::string> line = {row.label, std::to_string(row.seeds), std::to_string(row.diverged),
                                     steps.empty() ? kDash : steps, fmt_step(row.median_divergence_step),
                                     fmt_range(row.min_divergence_step, row.max_divergence_step, fmt_step),
                                     fmt_loss(row.median_train_loss), fmt_loss(row.median_val_loss),
                                     fmt_range(row.min_val_loss, row.max_val_loss, fmt_loss), fmt_rate(row.clip_rate[0]),
                                     fmt_rate(row.clip_rate[1]), fmt_rate(row.clip_rate[2])};
    if (elementwise) line.push_back(fmt_rate(row.elementwise_clip_rate));
    if (columns.loss_at_step) line.push_back(fmt_loss(median_loss_at(row, *columns.loss_at_step)));
    for (const auto& site : columns.sites) {
      const auto c = mean_site_clip_rate(row, site);
      line.insert(line.end(), {fmt_rate(c[0]), fmt_rate(c[1])});
    }
    if (diag)
      line.insert(line.end(), {fmt_ratio(row.diag_cosine), fmt_ratio(row.diag_rel_error), fmt_ratio(row.diag_bias),
                               row.bound_violations ? std::to_string(*row.bound_violations) : kDash});
    g.push_back(line);
  }
  return g;
}

std::vector<std::vector<std::string>> seed_table_cells(const std::vector<PolicyRow>& rows) {
  const auto seeds = all_seeds(rows);
  std::vector<std::vector<std::string>> g(1, {"policy"});
  for (uint64_t s : seeds) g[0].push_back("seed " + std::to_string(s));
  for (const auto& row : rows) {
    std::vector<std::string> line = {row.label};
    for (uint64_t s : seeds) {
      std::string cell;
      for (const RunRecord* r : row.runs)
        if (r->seed == s) cell += (cell.empty() ? "" : " / ") + seed_cell(*r);
      line.push_back(cell.empty() ? kDash : cell);
    }
    g.push_back(line);
  }
  return g;
}

namespace {

// Text columns left, numbers right: the first column (the policy) and the list of divergence steps.
std::string grid_text(const std::vector<std::vector<std::string>>& g, bool markdown) {
  std::vector<bool> right(g[0].size(), true);
  right[0] = false;
  for (size_t i = 0; i < g[0].size(); ++i)
    if (g[0][i] == "divergence steps") right[i] = false;
  return render_grid(g, right, markdown);
}

std::string policies_csv(const std::vector<PolicyRow>& rows, const CompareColumns& columns) {
  std::string out =
      "policy,seeds,diverged,divergence_steps,median_divergence_step,median_final_train_loss,median_final_val_loss,"
      "clip_rate_activation,clip_rate_weight,clip_rate_gradient,val_loss_min,val_loss_max,divergence_step_min,"
      "divergence_step_max,clip_rate_elementwise,diag_grad_cosine,diag_grad_rel_error,diag_grad_bias,"
      "diag_bound_violations";
  if (columns.loss_at_step) out += ",loss_at_step_" + std::to_string(*columns.loss_at_step);
  for (const auto& site : columns.sites)
    for (const char* op : {".a", ".b"}) {
      out += ',';
      out += csv_field("clip_rate_" + site + op);
    }
  out += "\n";
  for (const auto& row : rows) {
    out += csv_field(row.label) + "," + std::to_string(row.seeds) + "," + std::to_string(row.diverged) + "," +
           csv_field(divergence_list(row, ";")) + "," + shortest(row.median_divergence_step) + "," +
           shortest(row.median_train_loss) + "," + shortest(row.median_val_loss);
    // (Appended field by field: `"," + std::string` trips g++ 12's -Wrestrict false positive.)
    auto cell = [&](const std::string& v) {
      out += ',';
      out += v;
    };
    for (double c : row.clip_rate) cell(shortest(c));
    for (double x : {row.min_val_loss, row.max_val_loss, row.min_divergence_step, row.max_divergence_step,
                     row.elementwise_clip_rate, row.diag_cosine, row.diag_rel_error, row.diag_bias})
      cell(shortest(x));
    cell(row.bound_violations ? std::to_string(*row.bound_violations) : std::string());
    if (columns.loss_at_step) cell(shortest(median_loss_at(row, *columns.loss_at_step)));
    for (const auto& site : columns.sites) {
      const auto c = mean_site_clip_rate(row, site);
      cell(shortest(c[0]));
      cell(shortest(c[1]));
    }
    out += "\n";
  }
  return out;
}

std::string seeds_csv(const std::vector<PolicyRow>& rows) {
  std::string out =
      "policy,seed,diverged,divergence_step,reason,first_nonfinite_step,spike_step,departure_step,final_train_loss,"
      "final_val_loss,dir\n";
  auto step = [](const std::optional<int64_t>& s) { return s ? std::to_string(*s) : std::string(); };
  for (const auto& row : rows)
    for (const RunRecord* r : row.runs)
      out += csv_field(row.label) + "," + std::to_string(r->seed) + "," + (r->diverged ? "true" : "false") + "," +
             step(r->divergence_step) + "," + csv_field(r->reason) + "," + step(r->first_nonfinite_step) + "," +
             step(r->spike_step) + "," + step(r->departure_step) + "," + shortest(r->final_train_loss) + "," +
             shortest(r->final_val_loss) + "," + csv_field(r->dir) + "\n";
  return out;
}

ojson comparison_json(const std::vector<PolicyRow>& rows, CompareTables tables, const CompareColumns& columns) {
  ojson j = ojson::object();
  if (tables != CompareTables::seeds) {
    ojson pol = ojson::array();
    for (const auto& row : rows) {
      ojson steps = ojson::array(), dirs = ojson::array(), clip = ojson::object();
      for (const RunRecord* r : row.runs) {
        steps.push_back({{"seed", r->seed}, {"step", step_json(r->divergence_step)}});
        dirs.push_back(r->dir);
      }
      for (size_t c = 0; c < kTensorClasses.size(); ++c) clip[kTensorClasses[c]] = finite_or_null(row.clip_rate[c]);
      pol.push_back({{"policy", row.label},
                     {"seeds", row.seeds},
                     {"diverged", row.diverged},
                     {"divergence_steps", steps},
                     {"median_divergence_step", finite_or_null(row.median_divergence_step)},
                     {"median_final_train_loss", finite_or_null(row.median_train_loss)},
                     {"median_final_val_loss", finite_or_null(row.median_val_loss)},
                     {"clip_rate", clip},
                     {"val_loss_range", {finite_or_null(row.min_val_loss), finite_or_null(row.max_val_loss)}},
                     {"divergence_step_range",
                      {finite_or_null(row.min_divergence_step), finite_or_null(row.max_divergence_step)}},
                     {"clip_rate_elementwise", finite_or_null(row.elementwise_clip_rate)},
                     {"diag", {{"grad_cosine", finite_or_null(row.diag_cosine)},
                               {"grad_rel_error", finite_or_null(row.diag_rel_error)},
                               {"grad_bias", finite_or_null(row.diag_bias)},
                               {"bound_violations", row.bound_violations ? ojson(*row.bound_violations) : ojson(nullptr)}}},
                     {"runs", dirs}});
      if (columns.loss_at_step)
        pol.back()["loss_at_step"] = {{"step", *columns.loss_at_step},
                                      {"median", finite_or_null(median_loss_at(row, *columns.loss_at_step))}};
      for (const auto& site : columns.sites) {
        const auto c = mean_site_clip_rate(row, site);
        pol.back()["site_clip_rate"][site] = {{"a", finite_or_null(c[0])}, {"b", finite_or_null(c[1])}};
      }
    }
    j["policies"] = pol;
  }
  if (tables != CompareTables::policies) {
    ojson seeds = ojson::array();
    for (const auto& row : rows)
      for (const RunRecord* r : row.runs)
        seeds.push_back({{"policy", row.label},
                         {"seed", r->seed},
                         {"diverged", r->diverged},
                         {"divergence_step", step_json(r->divergence_step)},
                         {"reason", r->diverged ? ojson(r->reason) : ojson(nullptr)},
                         {"first_nonfinite_step", step_json(r->first_nonfinite_step)},
                         {"spike_step", step_json(r->spike_step)},
                         {"departure_step", step_json(r->departure_step)},
                         {"final_train_loss", finite_or_null(r->final_train_loss)},
                         {"final_val_loss", finite_or_null(r->final_val_loss)},
                         {"dir", r->dir}});
    j["seeds"] = seeds;
  }
  return j;
}

}  // namespace

std::string fmt_loss(double x) {
  if (!std::isfinite(x)) return std::isnan(x) ? kDash : (x > 0 ? "inf" : "-inf");
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", x);
  return b;
}

std::string fmt_step(double x) {
  if (std::isnan(x)) return kDash;
  char b[32];
  if (x == std::floor(x))
    std::snprintf(b, sizeof b, "%.0f", x);
  else
    std::snprintf(b, sizeof b, "%.1f", x);
  return b;
}

std::string fmt_rate(double x) {
  if (std::isnan(x)) return kDash;
  if (x == 0) return "0%";
  char b[32];
  std::snprintf(b, sizeof b, "%.3g%%", x * 100);
  return b;
}

std::string fmt_range(double lo, double hi, std::string (*fmt)(double)) {
  if (std::isnan(lo)) return kDash;
  return lo == hi ? fmt(lo) : fmt(lo) + "\u2013" + fmt(hi);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string render_grid(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right, bool markdown) {
  if (rows.empty()) return "";
  const size_t ncol = rows[0].size();
  std::vector<size_t> w(ncol, markdown ? 3 : 1);
  for (const auto& r : rows)
    for (size_t i = 0; i < ncol && i < r.size(); ++i) w[i] = std::max(w[i], display_width(r[i]));
  auto pad = [&](const std::string& s, size_t i) {
    const std::string fill(w[i] - display_width(s), ' ');
    return right[i] ? fill + s : s + fill;
  };
  std::string out;
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < ncol; ++i) {
      const std::string cell = pad(i < rows[k].size() ? rows[k][i] : "", i);
      line += markdown ? "| " + cell + " " : (i ? "  " : "") + cell;
    }
    if (markdown) line += "|";
    while (!markdown && !line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (k == 0) {
      std::string rule;
      for (size_t i = 0; i < ncol; ++i) {
        if (markdown)
          rule += "| " + (right[i] ? std::string(w[i] - 1, '-') + ":" : ":" + std::string(w[i] - 1, '-')) + " ";
        else
          rule += (i ? "  " : "") + std::string(w[i], '-');
      }
      out += rule + (markdown ? "|" : "") + "\n";
    }
  }
  return out;
}

std::string render_comparison(const std::vector<PolicyRow>& rows, CompareFormat format, CompareTables tables,
                              const CompareColumns& columns) {
  const bool pol = tables != CompareTables::seeds, seeds = tables != CompareTables::policies;
  switch (format) {
    case CompareFormat::json:
      return comparison_json(rows, tables, columns).dump(2) + "\n";
    case CompareFormat::csv:
      if (pol && seeds) throw std::invalid_argument("CSV holds one table: choose --table policies or --table seeds");
      return pol ? policies_csv(rows, columns) : seeds_csv(rows);
    case CompareFormat::table:
    case CompareFormat::markdown: {
      const bool md = format == CompareFormat::markdown;
      std::string out;
      if (pol) {
        out += md ? "**Policies** (most robust first: fewest seeds diverged, then latest median divergence step, then "
                    "lowest validation loss; losses are medians over the seeds that did not diverge, clip rates the "
                    "mean fraction of operand elements clipped per step)\n\n"
                  : "policies, most robust first (losses: median over the seeds that did not diverge; clip: mean "
                    "fraction of operand elements clipped per step)\n";
        out += grid_text(policy_table_cells(rows, columns), md);
      }
      if (pol && seeds) out += "\n";
      if (seeds) {
        out += md ? "**Per seed** (div N: diverged at step N; otherwise the final validation loss)\n\n"
                  : "per seed (div N: diverged at step N; otherwise the final validation loss)\n";
        out += grid_text(seed_table_cells(rows), md);
      }
      return out;
    }
  }
  return "";
}

}  // namespace drift
