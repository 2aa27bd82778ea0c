// The study layer's tables and figures: metrics/diag lines flattened into one per-step table (rates
// beside counts, arrays keyed by name, steps joined), its CSV and JSONL text, the report page's
// placeholders and escaping, and the SVG figures. Expected text written out by hand.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "study/report_page.h"
#include "study/step_table.h"
#include "study/svg_figures.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_study {

using namespace drift;
using ojson = nlohmann::ordered_json;

TEST_CASE("study: a metrics line flattens to one column per leaf, with rates beside counts") {
  StepTable t;
  t.add_line(ojson::parse(R"({"step": 10, "loss": 2.5, "skipped": false, "grad_norm_max_tensor": "head.w",
      "sites": {"fc.forward": {"a": {"elements": 8, "clipped": 2, "flushed": 0, "subnormal": 1, "amax": 3.5,
                                     "scale_exp": {"min": -3, "max": 1}}}},
      "classes": {"weight": {"elements": 0, "clipped": 0}}})"),
             "");
  const std::vector<std::string> want = {"step",
                                         "loss",
                                         "skipped",
                                         "grad_norm_max_tensor",
                                         "sites.fc.forward.a.elements",
                                         "sites.fc.forward.a.clipped",
                                         "sites.fc.forward.a.flushed",
                                         "sites.fc.forward.a.subnormal",
                                         "sites.fc.forward.a.amax",
                                         "sites.fc.forward.a.scale_exp.min",
                                         "sites.fc.forward.a.scale_exp.max",
                                         "sites.fc.forward.a.clip_rate",
                                         "sites.fc.forward.a.flush_rate",
                                         "sites.fc.forward.a.subnormal_rate",
                                         "classes.weight.elements",
                                         "classes.weight.clipped",
                                         "classes.weight.clip_rate"};
  CHECK(t.columns == want);
  const auto& row = t.rows.at(10);
  CHECK(row.at(t.column("sites.fc.forward.a.clip_rate")).get<double>() == 0.25);       // 2 / 8
  CHECK(row.at(t.column("sites.fc.forward.a.subnormal_rate")).get<double>() == 0.125);  // 1 / 8
  CHECK(row.at(t.column("classes.weight.clip_rate")).is_null());                        // no elements: no rate
  // "step 10" is 10; "skipped" false stays a boolean.
  CHECK(row.at(0).get<uint64_t>() == 10);
  CHECK(row.at(t.column("skipped")) == false);
}

TEST_CASE("study: diag lines join on the step under diag., arrays keyed by their names") {
  StepTable t;
  t.add_line(ojson::parse(R"({"step": 0, "loss": 5})"), "");
  t.add_line(ojson::parse(R"({"step": 5, "loss": 4})"), "");
  t.add_line(ojson::parse(R"({"step": 3, "grad": {"overall": {"cosine": 0.5}}, "probes": [{"name": "bf16", "loss": 4.5}, {"loss": 1}]})"),
             "diag.");
  CHECK(t.columns == std::vector<std::string>{"step", "loss", "diag.grad.overall.cosine", "diag.probes.bf16.loss", "diag.probes.1.loss"});
  CHECK(step_table_csv(t) ==
        "step,loss,diag.grad.overall.cosine,diag.probes.bf16.loss,diag.probes.1.loss\n"
        "0,5,,,\n"
        "3,,0.5,4.5,1\n"
        "5,4,,,\n");
  CHECK(step_table_jsonl(t) ==
        R"({"step":0,"loss":5,"diag.grad.overall.cosine":null,"diag.probes.bf16.loss":null,"diag.probes.1.loss":null})" "\n"
        R"({"step":3,"loss":null,"diag.grad.overall.cosine":0.5,"diag.probes.bf16.loss":4.5,"diag.probes.1.loss":1})" "\n"
        R"({"step":5,"loss":4,"diag.grad.overall.cosine":null,"diag.probes.bf16.loss":null,"diag.probes.1.loss":null})" "\n");
  CHECK_THROWS_WITH_AS(t.add_line(ojson::parse(R"({"loss": 1})"), ""), "a line without a \"step\"", std::runtime_error);
}

TEST_CASE("study: text columns are CSV-quoted") {
  StepTable t;
  t.add_line(ojson::parse(R"({"step": 1, "diverged": "loss spike, z=9 \"big\""})"), "");
  CHECK(step_table_csv(t) == "step,diverged\n1,\"loss spike, z=9 \"\"big\"\"\"\n");
}

TEST_CASE("study: the report page inlines the library and the data, and nothing ends a script early") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "drift_test_study_dygraphs";
  fs::create_directories(dir);
  std::ofstream(dir / "dygraph.min.js") << "var Dygraph = function(){}; var s = '</script>';";
  std::ofstream(dir / "dygraph.min.css") << ".dygraph-legend{}";
  setenv("DRIFT_DYGRAPHS_DIR", dir.c_str(), 1);
  const std::string page = render_report_html({{"runs", nlohmann::json::array()}, {"note", "</script><b>"}}, "a <title> & more");
  CHECK(page.find("<title>a &lt;title&gt; &amp; more</title>") != std::string::npos);
  CHECK(page.find("var s = '<\\/script>';") != std::string::npos);                // the library's text, made safe
  CHECK(page.find(R"("note":"\u003c/script>\u003cb>")") != std::string::npos);  // the data: '<' escaped
  CHECK(page.find(".dygraph-legend{}") != std::string::npos);
  CHECK(page.find("@@") == std::string::npos);  // every placeholder filled
  // Exactly the template's three </script> closings (data, library, page script) remain.
  size_t closings = 0;
  for (size_t p = page.find("</script>"); p != std::string::npos; p = page.find("</script>", p + 1)) ++closings;
  CHECK(closings == 3);

  setenv("DRIFT_DYGRAPHS_DIR", (dir / "absent").c_str(), 1);
  CHECK_THROWS_AS(render_report_html(nlohmann::json::object(), "t"), MissingLibraryError);
  try {
    render_report_html(nlohmann::json::object(), "t");
  } catch (const MissingLibraryError& e) {
    CHECK(std::string(e.what()).find("libjs-dygraphs") != std::string::npos);
  }
  unsetenv("DRIFT_DYGRAPHS_DIR");
  fs::remove_all(dir);
}

TEST_CASE("study: an SVG line plot: gaps at non-finite values, log axis drops values <= 0") {
  SvgLinePlot p;
  p.title = "loss <a&b>";
  p.ylabel = "loss";
  p.series.push_back({"run seed 1", "#123456", {0, 10, 20, 30}, {4, NAN, 2, 1}});
  const std::string svg = svg_line_plot(p);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("loss &lt;a&amp;b&gt;") != std::string::npos);
  // Plot area x from 70 to 530 over steps 0..30, y from 40 to 370 over losses 1..4:
  // (0, 4) -> (70, 40); the NaN breaks the line; (20, 2) -> (376.67, 260); (30, 1) -> (530, 370).
  CHECK(svg.find("d=\"M70.00 40.00 M376.67 260.00 L530.00 370.00\"") != std::string::npos);
  p.log_y = true;
  p.series[0].y = {100, 0, 10, 1};  // 0 has no logarithm: a gap
  const std::string log_svg = svg_line_plot(p);
  // log10: 2, (gap), 1, 0 over [0, 2]: y = 40, 205, 370.
  CHECK(log_svg.find("d=\"M70.00 40.00 M376.67 205.00 L530.00 370.00\"") != std::string::npos);
  // Log-axis labels: whole decades over 1..100; round values when the data spans less than a decade
  // (1.5..2.5: steps of 0.2 from 1.6).
  for (const char* label : {">1<", ">10<", ">100<"}) CHECK(log_svg.find(label) != std::string::npos);
  p.series[0].y = {1.5, 2.0, 2.5, 2.5};
  const std::string narrow = svg_line_plot(p);
  for (const char* label : {">1.6<", ">1.8<", ">2<", ">2.2<", ">2.4<"}) CHECK(narrow.find(label) != std::string::npos);
  CHECK(narrow.find(">1.58489<") == std::string::npos);
}

}  // namespace test_study
