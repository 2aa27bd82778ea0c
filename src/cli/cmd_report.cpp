// drift report: runs, sweeps and bisect directories as one self-contained HTML page of interactive
// charts (dygraphs, inlined), and with --figures the main charts as SVG files for a paper.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "io/npy.h"
#include "study/report_data.h"
#include "study/report_page.h"
#include "study/svg_figures.h"
#include "train/provenance.h"

namespace drift::cli {

namespace {

struct ReportOptions {
  std::vector<std::string> paths;
  std::string out = "report.html", figures, title;
};

void run_report(const ReportOptions& o) {
  nlohmann::json data;
  try {
    data = gather_report_data(o.paths);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
  const std::string commit = drift_build_commit();
  data["generated_by"] = std::string("drift ") + DRIFT_VERSION + (commit.empty() ? "" : " (" + commit.substr(0, 12) + ")") +
                         " report of " + std::to_string(data["runs"].size()) + " runs";
  std::string title = o.title;
  if (title.empty()) {
    title = "drift report:";
    for (const auto& p : o.paths) title += " " + p;
  }
  std::string page;
  try {
    page = render_report_html(data, title);
  } catch (const MissingLibraryError& e) {
    throw InputError(e.what());
  }
  try {
    io::write_file_atomic(o.out, page);
  } catch (const io::IoError& e) {
    throw InputError(std::string("--out: ") + e.what());
  }
  std::printf("report: %s (%zu runs, %.1f MB); open it in a browser\n", o.out.c_str(), data["runs"].size(),
              static_cast<double>(page.size()) / 1e6);
  if (!o.figures.empty()) {
    std::vector<std::string> files;
    try {
      files = write_report_figures(data, o.figures);
    } catch (const std::exception& e) {  // io::IoError, or a directory that cannot be created
      throw InputError(std::string("--figures: ") + e.what());
    }
    std::printf("figures: %zu SVG files in %s\n", files.size(), o.figures.c_str());
  }
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand(
      "report", "One self-contained HTML page of charts (loss, clip rates per site, diagnostics, the compare and "
                "bisect tables) for runs, sweeps and bisect directories; opens from file://, nothing fetched");
  cmd->add_option("paths", o->paths, "Run directories, or directories above them (a sweep, a bisect)")->required();
  cmd->add_option("--out", o->out, "The HTML file to write")->capture_default_str();
  cmd->add_option("--figures", o->figures, "Also write the main charts as SVG files into this directory (for a paper)");
  cmd->add_option("--title", o->title, "The page's title (default: drift report: PATHS)");
  cmd->footer("The charts are drawn by dygraphs from Debian's libjs-dygraphs (read from /usr/share/javascript/dygraphs "
              "or $DRIFT_DYGRAPHS_DIR and inlined into the page).");
  cmd->callback([o] { run_report(*o); });
}

}  // namespace drift::cli
