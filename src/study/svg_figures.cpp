#include "study/svg_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <cctype>
#include <set>

#include "io/npy.h"
#include "study/report_page.h"

namespace drift {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr double kW = 720, kH = 420, kLeft = 70, kRight = 190, kTop = 40, kBottom = 50;

std::string f2(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string tick_label(double v) {
  char b[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3))
    std::snprintf(b, sizeof b, "%.0e", v);
  else
    std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// About five round ticks over [lo, hi]: steps of 1, 2 or 5 times a power of ten.
std::vector<double> nice_ticks(double lo, double hi) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / 5, mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string header(const std::string& title, double w, double h) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + f2(w) + "\" height=\"" + f2(h) + "\" viewBox=\"0 0 " + f2(w) +
         " " + f2(h) + "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
         "<text x=\"" + f2(w / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + html_escape(title) + "</text>\n";
}

const double kRamp[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};  // viridis stops

std::string ramp_color(double t) {
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(static_cast<int>(t), 3);
  const double f = t - i;
  char b[32];
  std::snprintf(b, sizeof b, "rgb(%d,%d,%d)", static_cast<int>(std::lround(kRamp[i][0] + f * (kRamp[i + 1][0] - kRamp[i][0]))),
                static_cast<int>(std::lround(kRamp[i][1] + f * (kRamp[i + 1][1] - kRamp[i][1]))),
                static_cast<int>(std::lround(kRamp[i][2] + f * (kRamp[i + 1][2] - kRamp[i][2]))));
  return b;
}

}  // namespace

std::string svg_line_plot(const SvgLinePlot& p) {
  auto usable = [&](double v) { return std::isfinite(v) && (!p.log_y || v > 0); };
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& s : p.series)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (usable(s.y[i])) {
        xlo = std::min(xlo, s.x[i]), xhi = std::max(xhi, s.x[i]);
        const double y = p.log_y ? std::log10(s.y[i]) : s.y[i];
        ylo = std::min(ylo, y), yhi = std::max(yhi, y);
      }
  std::string out = header(p.title, kW, kH);
  if (!std::isfinite(xlo)) return out + "<text x=\"" + f2(kW / 2) + "\" y=\"" + f2(kH / 2) + "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
  if (xhi == xlo) xhi = xlo + 1;
  if (yhi == ylo) yhi = ylo + 1, ylo -= 1;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto X = [&](double x) { return kLeft + (x - xlo) / (xhi - xlo) * pw; };
  auto Y = [&](double y) { return kTop + ph - (y - ylo) / (yhi - ylo) * ph; };
  out += "<g stroke=\"#ccc\" stroke-width=\"0.5\">\n";
  std::string labels;
  for (double t : nice_ticks(xlo, xhi)) {
    out += "<line x1=\"" + f2(X(t)) + "\" y1=\"" + f2(kTop) + "\" x2=\"" + f2(X(t)) + "\" y2=\"" + f2(kTop + ph) + "\"/>\n";
    labels += "<text x=\"" + f2(X(t)) + "\" y=\"" + f2(kTop + ph + 16) + "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  }
  // y ticks as values: on a log axis whole decades when it spans one or more, else round values.
  std::vector<double> yticks;
  if (!p.log_y || yhi - ylo < 1) {
    yticks = p.log_y ? nice_ticks(std::pow(10, ylo), std::pow(10, yhi)) : nice_ticks(ylo, yhi);
  } else {
    for (double e = std::ceil(ylo); e <= yhi; ++e) yticks.push_back(std::pow(10, e));
  }
  for (double v : yticks) {
    if (p.log_y && !(v > 0)) continue;
    const double t = p.log_y ? std::log10(v) : v;
    if (t < ylo - 1e-12 || t > yhi + 1e-12) continue;
    out += "<line x1=\"" + f2(kLeft) + "\" y1=\"" + f2(Y(t)) + "\" x2=\"" + f2(kLeft + pw) + "\" y2=\"" + f2(Y(t)) + "\"/>\n";
    labels += "<text x=\"" + f2(kLeft - 6) + "\" y=\"" + f2(Y(t) + 4) + "\" text-anchor=\"end\">" + tick_label(v) + "</text>\n";
  }
  out += "</g>\n<rect x=\"" + f2(kLeft) + "\" y=\"" + f2(kTop) + "\" width=\"" + f2(pw) + "\" height=\"" + f2(ph) +
         "\" fill=\"none\" stroke=\"#444\"/>\n" + labels;
  out += "<text x=\"" + f2(kLeft + pw / 2) + "\" y=\"" + f2(kH - 12) + "\" text-anchor=\"middle\">" + html_escape(p.xlabel) + "</text>\n";
  out += "<text transform=\"translate(16 " + f2(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         html_escape(p.ylabel + (p.log_y ? " (log scale)" : "")) + "</text>\n";
  for (const auto& s : p.series) {
    std::string path;
    bool pen = false;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(s.y[i])) {
        pen = false;
        continue;
      }
      path += (pen ? " L" : " M") + f2(X(s.x[i])) + " " + f2(Y(p.log_y ? std::log10(s.y[i]) : s.y[i]));
      pen = true;
    }
    if (!path.empty())
      out += "<path d=\"" + path.substr(1) + "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.4\"><title>" +
             html_escape(s.name) + "</title></path>\n";
  }
  // Legend: every series, or (past 12) one entry per distinct colour family name before " seed".
  std::vector<std::pair<std::string, std::string>> legend;
  std::set<std::string> seen;
  for (const auto& s : p.series) {
    std::string name = s.name;
    if (p.series.size() > 12) name = name.substr(0, name.rfind(" seed "));
    if (seen.insert(name).second) legend.emplace_back(name, s.color);
  }
  double ly = kTop + 8;
  for (const auto& [name, color] : legend) {
    if (ly > kH - 20) break;
    out += "<rect x=\"" + f2(kW - kRight + 12) + "\" y=\"" + f2(ly - 8) + "\" width=\"10\" height=\"10\" fill=\"" + color + "\"/>";
    out += "<text x=\"" + f2(kW - kRight + 26) + "\" y=\"" + f2(ly + 1) + "\" font-size=\"11\">" +
           html_escape(name.size() > 28 ? name.substr(0, 27) + "\u2026" : name) + "</text>\n";
    ly += 16;
  }
  return out + "</svg>\n";
}

std::string svg_heatmap(const std::string& title, const std::vector<std::string>& row_names, const std::vector<double>& x,
                        const std::vector<std::vector<double>>& rows) {
  const double left = 190, cell_h = 14, top = kTop, ph = std::max(1.0, cell_h * static_cast<double>(rows.size()));
  const double h = top + ph + kBottom + 20, pw = kW - left - 30;
  std::string out = header(title, kW, h);
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& r : rows)
    for (double v : r)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  const size_t n = x.size();
  const double cw = n ? pw / static_cast<double>(n) : pw;
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = top + cell_h * static_cast<double>(r);
    out += "<text x=\"" + f2(left - 6) + "\" y=\"" + f2(y + cell_h - 3) + "\" text-anchor=\"end\" font-size=\"10\">" +
           html_escape(row_names[r]) + "</text>\n";
    for (size_t i = 0; i < n && i < rows[r].size(); ++i)
      if (std::isfinite(rows[r][i]))
        out += "<rect x=\"" + f2(left + cw * static_cast<double>(i)) + "\" y=\"" + f2(y) + "\" width=\"" + f2(cw + 0.3) +
               "\" height=\"" + f2(cell_h) + "\" fill=\"" + ramp_color(hi > lo ? (rows[r][i] - lo) / (hi - lo) : 0) + "\"/>";
    out += "\n";
  }
  if (n) {
    const double first = x.front(), last = x.back();
    for (double t : nice_ticks(first, last)) {
      const double px = left + (last > first ? (t - first) / (last - first) : 0) * (pw - cw) + cw / 2;
      out += "<text x=\"" + f2(px) + "\" y=\"" + f2(top + ph + 14) + "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
    }
  }
  const double by = top + ph + 26;
  out += "<text x=\"" + f2(left + pw / 2) + "\" y=\"" + f2(by + 12) + "\" text-anchor=\"middle\">step</text>\n";
  for (int k = 0; k < 20; ++k)
    out += "<rect x=\"" + f2(left + 6 * k) + "\" y=\"" + f2(by) + "\" width=\"6.3\" height=\"8\" fill=\"" + ramp_color(k / 19.0) + "\"/>";
  out += "\n<text x=\"" + f2(left - 4) + "\" y=\"" + f2(by + 8) + "\" text-anchor=\"end\" font-size=\"10\">" + tick_label(lo) +
         "</text><text x=\"" + f2(left + 124) + "\" y=\"" + f2(by + 8) + "\" font-size=\"10\">" + tick_label(hi) + "</text>\n";
  return out + "</svg>\n";
}

std::string run_color(const json& runs, size_t k) {
  std::vector<std::string> policies;
  for (const auto& r : runs)
    if (std::find(policies.begin(), policies.end(), r["label"].get<std::string>()) == policies.end())
      policies.push_back(r["label"].get<std::string>());
  const std::string label = runs[k]["label"].get<std::string>();
  const size_t p = static_cast<size_t>(std::find(policies.begin(), policies.end(), label) - policies.begin());
  size_t same = 0, index = 0;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i]["label"] == label) {
      if (i == k) index = same;
      ++same;
    }
  const long hue = (std::lround(360.0 * static_cast<double>(p) / static_cast<double>(policies.size())) + 210) % 360;
  const double light = same > 1 ? 35 + 30.0 * static_cast<double>(index) / static_cast<double>(same - 1) : 48;
  char b[48];
  std::snprintf(b, sizeof b, "hsl(%ld,70%%,%.0f%%)", hue, light);
  return b;
}

namespace {

std::vector<double> numbers(const json& a) {
  std::vector<double> v;
  for (const auto& x : a) v.push_back(x.is_number() ? x.get<double>() : NAN);
  return v;
}

SvgLinePlot run_plot(const json& data, const std::string& col, const std::string& title, const std::string& ylabel, bool log_y) {
  SvgLinePlot p{title, "step", ylabel, log_y, {}};
  const bool diag = col.rfind("diag.", 0) == 0;  // diag.jsonl's columns have their own steps
  const char* steps = diag ? "diag_steps" : "steps";
  const char* cols = diag ? "diag_cols" : "cols";
  for (const auto& r : data["runs"])
    if (r[cols].contains(col))
      p.series.push_back({r["label"].get<std::string>() + " seed " + r["seed"].dump(), r["color"].get<std::string>(),
                          numbers(r[steps]), numbers(r[cols][col])});
  return p;
}

// A file name made of a label: letters, digits, '-', '_' and '.'.
std::string file_part(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  return out;
}

}  // namespace

std::vector<std::string> write_report_figures(const json& data, const std::string& dir) {
  fs::create_directories(dir);
  std::vector<std::string> written;
  auto write = [&](const std::string& name, const std::string& svg) {
    const std::string path = (fs::path(dir) / name).string();
    io::write_file_atomic(path, svg);
    written.push_back(path);
  };
  struct Figure {
    const char* file;
    const char* col;
    const char* title;
    const char* ylabel;
    bool log_y;
  };
  static const Figure kFigures[] = {
      {"loss.svg", "loss", "training loss", "loss", false},
      {"val_loss.svg", "val_loss", "validation loss", "loss", false},
      {"grad_norm.svg", "grad_norm", "gradient norm", "norm", true},
      {"lr.svg", "lr", "learning rate", "lr", false},
      {"loss_scale.svg", "loss_scale", "loss scale", "scale", true},
      {"clip_rate_activation.svg", "classes.activation.clip_rate", "clip rate, activations", "fraction clipped", false},
      {"clip_rate_weight.svg", "classes.weight.clip_rate", "clip rate, weights", "fraction clipped", false},
      {"clip_rate_gradient.svg", "classes.gradient.clip_rate", "clip rate, gradients", "fraction clipped", false},
      {"diag_grad_cosine.svg", "diag.grad.overall.cosine", "gradient cosine against the exact gradient", "cosine", false},
      {"diag_grad_rel_error.svg", "diag.grad.overall.rel_error", "gradient relative error", "relative error", true},
      {"diag_grad_bias.svg", "diag.grad.overall.bias", "gradient bias along the exact gradient", "bias", false},
  };
  for (const auto& f : kFigures) {
    const SvgLinePlot p = run_plot(data, f.col, f.title, f.ylabel, f.log_y);
    if (!p.series.empty()) write(f.file, svg_line_plot(p));
  }
  // Site × step clip-rate heatmaps: the first run of each policy.
  std::set<std::string> done;
  for (const auto& r : data["runs"]) {
    if (!done.insert(r["label"].get<std::string>()).second) continue;
    std::vector<std::string> names;
    std::vector<std::vector<double>> rows;
    const std::string prefix = "sites.", suffix = ".clip_rate";
    for (auto it = r["cols"].begin(); it != r["cols"].end(); ++it) {
      const std::string& c = it.key();
      if (c.rfind(prefix, 0) == 0 && c.size() > prefix.size() + suffix.size() &&
          c.compare(c.size() - suffix.size(), suffix.size(), suffix) == 0) {
        names.push_back(c.substr(prefix.size(), c.size() - prefix.size() - suffix.size()));
        rows.push_back(numbers(it.value()));
      }
    }
    if (names.empty()) continue;
    const std::string run = r["label"].get<std::string>() + " seed " + r["seed"].dump();
    write("sites_clip_rate_" + file_part(run) + ".svg", svg_heatmap("clip rate per site and operand: " + run, names,
                                                                      numbers(r["steps"]), rows));
  }
  return written;
}

}  // namespace drift
