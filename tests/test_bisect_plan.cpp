// drift bisect's plan: which classes are lossy in a resolved config, the restoration rules (appended
// to precision.matmul and to every schedule entry), and the order and skip notes of the classes.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "study/bisect_plan.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_bisect_plan {

using namespace drift;
using json = nlohmann::json;
using layers = std::vector<std::string>;

namespace {

std::vector<std::string> names(const std::vector<Restoration>& v, bool applicable) {
  std::vector<std::string> out;
  for (const auto& r : v)
    if (r.applicable == applicable) out.push_back(r.name);
  return out;
}

}  // namespace

TEST_CASE("a restoration rule goes at the end of precision.matmul and of every schedule entry") {
  const json p = json::parse(R"({"matmul": [{"preset": "mxfp8_e4m3"}], "master": "fp32",
                                 "schedule": [{"step": 5, "matmul": [{"preset": "bf16"}]}, {"step": 9, "matmul": "fp16_acc"}]})");
  const json rule = json::parse(R"({"match": {"role": "grad_input"}, "preset": "fp32"})");
  const json r = with_fp32_rule(p, "grad_input");
  CHECK(r["matmul"] == json::array({json::parse(R"({"preset": "mxfp8_e4m3"})"), rule}));
  CHECK(r["schedule"][0]["matmul"] == json::array({json::parse(R"({"preset": "bf16"})"), rule}));
  CHECK(r["schedule"][1]["matmul"] == json::array({json::parse(R"({"preset": "fp16_acc"})"), rule}));
  CHECK(r["schedule"][1]["step"] == 9);
  CHECK(r["master"] == "fp32");
  const json l = with_fp32_rule(json::parse(R"({"matmul": "bf16"})"), "forward", "head");
  CHECK(l["matmul"] == json::parse(R"([{"preset": "bf16"}, {"match": {"layer": "head", "role": "forward"}, "preset": "fp32"}])"));
  CHECK(!l.contains("schedule"));
}

TEST_CASE("lossy layers per role, at step 0 and at every schedule step") {
  const json cfg = json::parse(R"({"model": {"kind": "mlp", "context": 4, "embed": 4, "hidden": 8, "hidden_layers": 1},
    "precision": {"matmul": [{"match": {"layer": "head", "role": "forward"}, "preset": "mxfp8_e4m3"}],
                  "schedule": [{"step": 10, "matmul": [{"match": {"role": "grad_weight"}, "preset": "bf16"}]}]},
    "version": "0.1.0"})");
  const auto lossy = lossy_layers_by_role(cfg);
  CHECK(lossy.at("forward") == layers{"head"});
  CHECK(lossy.at("grad_weight") == layers{"hidden0", "head"});
  CHECK(lossy.at("grad_input").empty());
  // The fp32 preset is the passthrough: nothing to restore.
  const auto none = lossy_layers_by_role(json::parse(R"({"model": {"hidden": 8}, "precision": {"matmul": "fp32"}})"));
  for (const auto& entry : none) CHECK_MESSAGE(entry.second.empty(), entry.first);
}

TEST_CASE("classes in order, cheapest first; those not lossy are skipped with a note") {
  const std::map<std::string, layers> lossy = {{"forward", {"hidden0", "head"}}, {"grad_input", {}}, {"grad_weight", {"head"}}};
  const json cfg = json::parse(R"({"precision": {"matmul": [{"preset": "mxfp8_e4m3"}], "schedule": [], "master": "fp32"}})");
  const auto plan = plan_class_restorations(cfg, lossy);
  REQUIRE(plan.size() == 6);
  CHECK(names(plan, false) == layers{"allreduce", "optimizer_state", "master", "grad_input"});
  CHECK(names(plan, true) == layers{"grad_weight", "forward"});
  CHECK(plan[0].note.find("not in this run's config") != std::string::npos);
  CHECK(plan[2].note == "skipped: master weights already fp32");
  CHECK(plan[4].role == "grad_weight");
  CHECK(plan[4].sets ==
        layers{R"(precision.matmul=[{"preset":"mxfp8_e4m3"},{"match":{"role":"grad_weight"},"preset":"fp32"}])"});

  // Lossy master weights, optimizer state and reduction are restored by their own keys.
  const json low = json::parse(R"({"precision": {"matmul": [], "master": {"format": "bf16", "rounding": "sr"},
                                   "optimizer_state": "int8_block", "allreduce": {"ranks": 4, "format": "bf16"}}})");
  const auto p2 = plan_class_restorations(low, {});
  CHECK(names(p2, true) == layers{"allreduce", "optimizer_state", "master"});
  CHECK(p2[0].sets == layers{R"(precision.allreduce.format="fp32")"});
  CHECK(p2[1].sets == layers{R"(precision.optimizer_state="fp32")"});
  CHECK(p2[2].sets == layers{R"(precision.master="fp32")"});
  const json fp32ish = json::parse(R"({"precision": {"master": {"format": "fp32"}, "optimizer_state": "fp32",
                                       "allreduce": {"ranks": 1, "format": "bf16"}}})");
  CHECK(names(plan_class_restorations(fp32ish, {}), true).empty());
  const json one_fp32 = json::parse(R"({"precision": {"allreduce": {"ranks": 8, "format": "fp32"}}})");
  CHECK(plan_class_restorations(one_fp32, {})[0].note == "skipped: the reduction is already fp32");

  const auto lp = plan_layer_restorations(cfg, "forward", {"hidden0", "head"});
  REQUIRE(lp.size() == 2);
  CHECK(lp[1].name == "forward head");
  CHECK(lp[1].layer == "head");
  CHECK(lp[1].sets ==
        layers{R"(precision.matmul=[{"preset":"mxfp8_e4m3"},{"match":{"layer":"head","role":"forward"},"preset":"fp32"}])"});
}

}  // namespace test_bisect_plan
