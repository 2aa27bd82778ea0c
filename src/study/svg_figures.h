// `drift report --figures DIR`: the report's main charts as SVG files for a paper. Written by drift
// itself (a plain vector format, no browser or plotting package needed at report time, the same
// bytes for the same runs); the interactive page draws with dygraphs, which draws only on a canvas.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace drift {

struct SvgSeries {
  std::string name, color;
  std::vector<double> x, y;  // NaN: a gap
};

struct SvgLinePlot {
  std::string title, xlabel = "step", ylabel;
  bool log_y = false;
  std::vector<SvgSeries> series;
};

// A line plot: axes with round ticks, one polyline per series, a legend (policies when there are
// more than 12 series). Non-finite values (and values <= 0 on a log axis) leave gaps.
std::string svg_line_plot(const SvgLinePlot& p);

// A heatmap: rows[i] named row_names[i], a cell per x, coloured on the viridis ramp from min to max.
std::string svg_heatmap(const std::string& title, const std::vector<std::string>& row_names, const std::vector<double>& x,
                        const std::vector<std::vector<double>>& rows);

// Writes the figures of a report (gather_report_data's document) into `dir` (created): loss.svg,
// val_loss.svg, grad_norm.svg, lr.svg, clip_rate_<class>.svg, diag_grad_<cosine|rel_error|bias>.svg
// when present, and sites_clip_rate_<run>.svg per policy's first run. Returns the files written.
std::vector<std::string> write_report_figures(const nlohmann::json& data, const std::string& dir);

// The colour of run `k` among `runs` (one hue per policy label, a lightness per seed), as the page uses.
std::string run_color(const nlohmann::json& runs, size_t k);

}  // namespace drift
