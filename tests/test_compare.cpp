// drift compare's logic: medians, clip rates from metrics lines, grouping runs by policy, the
// survival order, and the rendered tables (expected text written out by hand).
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "study/compare.h"
#include "study/compare_render.h"
#include "study/run_index.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_compare {

using namespace drift;
using json = nlohmann::json;

namespace {

RunRecord run(const std::string& label, const std::string& matmul, uint64_t seed, int64_t div_step, double val,
              double train = NAN) {
  RunRecord r;
  r.dir = "runs/" + label + "/seed" + std::to_string(seed);
  r.seed = seed;
  r.label = label;
  r.config = {{"seed", seed}, {"output", {{"name", label}, {"dir", r.dir}}}, {"version", "0.1.0"},
              {"train", {{"lr", 0.003}}}, {"precision", {{"matmul", matmul}}}};
  r.diverged = div_step >= 0;
  if (r.diverged) {
    r.divergence_step = div_step;
    r.reason = "non-finite loss";
  }
  r.final_val_loss = val;
  r.final_train_loss = train;
  return r;
}

std::vector<std::string> labels(const std::vector<PolicyRow>& rows) {
  std::vector<std::string> v;
  for (const auto& r : rows) v.push_back(r.label);
  return v;
}

}  // namespace

TEST_CASE("median: odd and even counts, NaN ignored, none is NaN") {
  CHECK(std::isnan(median({})));
  CHECK(median({3}) == 3);
  CHECK(median({4, 1, 3}) == 3);
  CHECK(median({4, 1, 3, 2}) == 2.5);
  CHECK(median({NAN, 1, 5}) == 3);
  CHECK(std::isnan(median({NAN})));
}

TEST_CASE("clip rate per class: mean over logged steps of clipped / elements") {
  const std::vector<json> lines = {
      json::parse(R"({"step": 0, "classes": {"activation": {"elements": 100, "clipped": 1},
                                             "weight": {"elements": 50, "clipped": 0},
                                             "gradient": {"elements": 0, "clipped": 0}}})"),
      json::parse(R"({"step": 10, "classes": {"activation": {"elements": 200, "clipped": 6}}})"),
      json::parse(R"({"step": 20})")};
  const auto rate = mean_clip_rates(lines);
  CHECK(rate[0] == doctest::Approx(0.02).epsilon(1e-15));  // (1/100 + 6/200) / 2
  CHECK(rate[1] == 0);
  CHECK(std::isnan(rate[2]));  // no step had gradient elements
  const auto none = mean_clip_rates({json::parse(R"({"step": 0})")});
  CHECK(std::isnan(none[0]));
}

TEST_CASE("runs group by policy and sort by survival") {
  std::vector<RunRecord> runs = {
      // A: 2 of 4 diverged (steps 100, 300: median 200); survivors' val 2.0, 2.2 (median 2.1)
      run("A", "a", 1, 100, NAN), run("A", "a", 2, -1, 2.2, 2.0), run("A", "a", 3, 300, NAN), run("A", "a", 4, -1, 2.0, 1.9),
      // B: none of 4 diverged; val 2.5, 2.4, 2.6, 2.3 (median 2.45)
      run("B", "b", 1, -1, 2.5), run("B", "b", 2, -1, 2.4), run("B", "b", 3, -1, 2.6), run("B", "b", 4, -1, 2.3),
      // C: 1 of 2 diverged (the same fraction as A) but later: step 500
      run("C", "c", 2, -1, 3.0), run("C", "c", 1, 500, NAN),
      // D: none of 3 diverged, val median 2.1 < B's
      run("D", "d", 1, -1, 2.0), run("D", "d", 2, -1, 2.2), run("D", "d", 3, -1, 2.1)};
  const auto rows = group_by_policy(runs, GroupBy::policy);
  CHECK(labels(rows) == std::vector<std::string>{"D", "B", "C", "A"});
  const PolicyRow& a = rows[3];
  CHECK(a.seeds == 4);
  CHECK(a.diverged == 2);
  CHECK(a.median_divergence_step == 200);
  CHECK(a.median_val_loss == doctest::Approx(2.1).epsilon(1e-15));
  CHECK(a.median_train_loss == doctest::Approx(1.95).epsilon(1e-15));
  CHECK(rows[1].median_val_loss == doctest::Approx(2.45).epsilon(1e-15));
  CHECK(std::isnan(rows[1].median_divergence_step));
  CHECK(rows[2].runs[0]->seed == 1);  // runs sorted by seed

  // The same label on two different policies: the first differing config key tells them apart.
  std::vector<RunRecord> clash = {run("mx", "a", 1, -1, 2.0), run("mx", "b", 1, -1, 2.1)};
  CHECK(labels(group_by_policy(clash, GroupBy::policy)) ==
        std::vector<std::string>{"mx [/precision/matmul=a]", "mx [/precision/matmul=b]"});
  // Seeds and output do not split a policy; --by precision ignores every other section.
  std::vector<RunRecord> lr = {run("p", "a", 1, -1, 2.0), run("p", "a", 2, -1, 2.0)};
  lr[1].config["train"]["lr"] = 0.01;
  CHECK(group_by_policy(lr, GroupBy::policy).size() == 2);
  CHECK(group_by_policy(lr, GroupBy::precision).size() == 1);
}

TEST_CASE("numbers for people") {
  CHECK(fmt_loss(2.34567) == "2.3457");
  CHECK(fmt_loss(NAN) == "\u2014");
  CHECK(fmt_loss(INFINITY) == "inf");
  CHECK(fmt_step(200) == "200");
  CHECK(fmt_step(412.5) == "412.5");
  CHECK(fmt_step(NAN) == "\u2014");
  CHECK(fmt_rate(0.0123) == "1.23%");
  CHECK(fmt_rate(0) == "0%");
  CHECK(fmt_rate(1e-5) == "0.001%");
  CHECK(fmt_rate(NAN) == "\u2014");
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
}

TEST_CASE("grids align by code points, text and markdown") {
  const std::vector<std::vector<std::string>> g = {{"a", "bb"}, {"ccc", "1"}, {"\u2014", "\u2014"}};
  CHECK(render_grid(g, {false, true}, false) == "a    bb\n---  --\nccc   1\n\u2014     \u2014\n");
  CHECK(render_grid(g, {false, true}, true) ==
        "| a   |  bb |\n| :-- | --: |\n| ccc |   1 |\n| \u2014   |   \u2014 |\n");
}

TEST_CASE("the comparison as markdown, CSV and JSON") {
  std::vector<RunRecord> runs = {run("mx", "a", 1, 12, NAN, INFINITY), run("mx", "a", 2, -1, 2.5, 2.25),
                                 run("fp32", "f", 1, -1, 2.0, 1.5)};
  runs[1].clip_rate = {0.5, 0, NAN};
  runs[0].clip_rate = {0.25, 0, NAN};
  runs[0].first_nonfinite_step = 12;
  const auto rows = group_by_policy(runs, GroupBy::policy);
  const std::string md = render_comparison(rows, CompareFormat::markdown, CompareTables::both);
  const std::string expected_policies =
      "| policy | seeds | diverged | divergence steps | median div. step | div. step range | median train loss | median val loss | val loss range | clip act | clip weight | clip grad |\n"
      "| :----- | ----: | -------: | :--------------- | ---------------: | --------------: | ----------------: | --------------: | -------------: | -------: | ----------: | --------: |\n"
      "| fp32   |     1 |        0 | \u2014                |                \u2014 |               \u2014 |            1.5000 |          2.0000 |         2.0000 |        \u2014 |           \u2014 |         \u2014 |\n"
      "| mx     |     2 |        1 | 12               |               12 |              12 |            2.2500 |          2.5000 |         2.5000 |    37.5% |          0% |         \u2014 |\n";
  CHECK(md.find(expected_policies) != std::string::npos);
  const std::string expected_seeds =
      "| policy | seed 1 | seed 2 |\n"
      "| :----- | -----: | -----: |\n"
      "| fp32   | 2.0000 |      \u2014 |\n"
      "| mx     | div 12 | 2.5000 |\n";
  CHECK(md.find(expected_seeds) != std::string::npos);

  CHECK(render_comparison(rows, CompareFormat::csv, CompareTables::policies) ==
        "policy,seeds,diverged,divergence_steps,median_divergence_step,median_final_train_loss,median_final_val_loss,"
        "clip_rate_activation,clip_rate_weight,clip_rate_gradient,val_loss_min,val_loss_max,divergence_step_min,"
        "divergence_step_max,clip_rate_elementwise,diag_grad_cosine,diag_grad_rel_error,diag_grad_bias,"
        "diag_bound_violations\n"
        "fp32,1,0,,,1.5,2,,,,2,2,,,,,,,\n"
        "mx,2,1,12,12,2.25,2.5,0.375,0,,2.5,2.5,12,12,,,,,\n");
  CHECK(render_comparison(rows, CompareFormat::csv, CompareTables::seeds) ==
        "policy,seed,diverged,divergence_step,reason,first_nonfinite_step,spike_step,departure_step,final_train_loss,"
        "final_val_loss,dir\n"
        "fp32,1,false,,,,,,1.5,2,runs/fp32/seed1\n"
        "mx,1,true,12,non-finite loss,12,,,inf,,runs/mx/seed1\n"
        "mx,2,false,,,,,,2.25,2.5,runs/mx/seed2\n");
  CHECK_THROWS_AS(render_comparison(rows, CompareFormat::csv, CompareTables::both), std::invalid_argument);

  const json j = json::parse(render_comparison(rows, CompareFormat::json, CompareTables::both));
  CHECK(j["policies"][1]["policy"] == "mx");
  CHECK(j["policies"][1]["divergence_steps"] == json::parse(R"([{"seed": 1, "step": 12}, {"seed": 2, "step": null}])"));
  CHECK(j["policies"][1]["median_divergence_step"] == 12.0);
  CHECK(j["policies"][1]["clip_rate"] == json::parse(R"({"activation": 0.375, "weight": 0.0, "gradient": null})"));
  CHECK(j["policies"][0]["median_divergence_step"].is_null());
  CHECK(j["seeds"].size() == 3);
  CHECK(j["seeds"][1]["final_train_loss"].is_null());  // inf is not JSON
  CHECK(j["seeds"][1]["first_nonfinite_step"] == 12);
  CHECK(j["seeds"][1]["spike_step"].is_null());
}

TEST_CASE("compare: spread across seeds, loss at a step, site columns, elementwise and diag summaries") {
  // Three seeds of one policy: seeds 1 and 3 survive (val 2.0 and 3.0), seed 2 diverges at step 40;
  // a fourth run diverges at 10 (so the divergence steps span 10..40; listed in seed order).
  std::vector<RunRecord> runs = {run("p", "a", 1, -1, 2.0, 1.0), run("p", "a", 2, 40, NAN), run("p", "a", 3, -1, 3.0, 1.0),
                                 run("p", "a", 4, 10, NAN)};
  runs[0].loss_at = {{0, 5.0}, {20, 3.0}};
  runs[1].loss_at = {{0, 5.0}, {20, NAN}};  // non-finite: counts as inf
  runs[2].loss_at = {{0, 5.0}, {20, 2.0}};
  runs[3].loss_at = {{0, 5.0}};             // did not log step 20
  runs[0].site_clip_rate = {{"fc.forward", {0.5, 0.0}}};
  runs[1].site_clip_rate = {{"fc.forward", {0.25, NAN}}};
  runs[0].elementwise_clip_rate = 0.1;
  runs[2].elementwise_clip_rate = 0.3;
  runs[0].diag_cosine = 0.9, runs[0].diag_rel_error = 0.2, runs[0].diag_bias = -0.1, runs[0].bound_violations = 0;
  runs[1].diag_cosine = 0.7, runs[1].diag_rel_error = 0.4, runs[1].diag_bias = -0.3, runs[1].bound_violations = 2;
  const auto rows = group_by_policy(runs, GroupBy::policy);
  REQUIRE(rows.size() == 1);
  const PolicyRow& r = rows[0];
  CHECK(r.min_val_loss == 2.0);
  CHECK(r.max_val_loss == 3.0);
  CHECK(r.min_divergence_step == 10);
  CHECK(r.max_divergence_step == 40);
  CHECK(r.elementwise_clip_rate == doctest::Approx(0.2).epsilon(1e-15));  // (0.1 + 0.3) / 2
  CHECK(r.diag_cosine == doctest::Approx(0.8).epsilon(1e-15));
  CHECK(r.diag_rel_error == doctest::Approx(0.3).epsilon(1e-15));
  CHECK(r.diag_bias == doctest::Approx(-0.2).epsilon(1e-15));
  CHECK(r.bound_violations == 2u);
  CHECK(median_loss_at(r, 20) == 3.0);  // median of {3, inf, 2}
  CHECK(median_loss_at(r, 0) == 5.0);
  CHECK(std::isnan(median_loss_at(r, 7)));
  const auto site = mean_site_clip_rate(r, "fc.forward");
  CHECK(site[0] == 0.375);  // (0.5 + 0.25) / 2
  CHECK(site[1] == 0.0);    // NaN ignored
  CompareColumns cols;
  cols.loss_at_step = 20;
  cols.sites = {"fc.forward"};
  const auto cells = policy_table_cells(rows, cols);
  const std::vector<std::string> want_head = {"policy", "seeds", "diverged", "divergence steps", "median div. step",
                                              "div. step range", "median train loss", "median val loss", "val loss range",
                                              "clip act", "clip weight", "clip grad", "clip elementwise", "loss at 20",
                                              "clip fc.forward.a", "clip fc.forward.b", "grad cosine", "grad rel. error",
                                              "grad bias", "bound violations"};
  CHECK(cells[0] == want_head);
  const std::vector<std::string> want_row = {"p", "4", "2", "40, 10", "25", "10\u201340", "1.0000", "2.5000",
                                             "2.0000\u20133.0000", "\u2014", "\u2014", "\u2014", "20%", "3.0000",
                                             "37.5%", "0%", "0.8", "0.3", "-0.2", "2"};
  CHECK(cells[1] == want_row);
  const json j = json::parse(render_comparison(rows, CompareFormat::json, CompareTables::policies, cols));
  CHECK(j["policies"][0]["val_loss_range"] == json::parse("[2.0, 3.0]"));
  CHECK(j["policies"][0]["loss_at_step"] == json::parse(R"({"step": 20, "median": 3.0})"));
  CHECK(j["policies"][0]["site_clip_rate"]["fc.forward"]["a"] == 0.375);
  CHECK(j["policies"][0]["diag"]["bound_violations"] == 2);
}

}  // namespace test_compare
