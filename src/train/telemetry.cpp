#include "train/telemetry.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace drift {

using ojson = nlohmann::ordered_json;

namespace {

ojson quant_json(const QuantStats& st) {
  ojson q = {{"elements", st.elements}, {"clipped", st.clipped}, {"flushed", st.flushed},
             {"subnormal", st.subnormal}, {"amax", st.amax}};
  if (st.scale_count)
    q["scale_exp"] = {{"min", st.scale_exp_min},
                      {"max", st.scale_exp_max},
                      {"mean", st.scale_exp_sum / static_cast<double>(st.scale_count)}};
  return q;
}

}  // namespace

ojson site_metrics(const MatmulSites& sites, bool swamping) {
  ojson j = ojson::object();
  for (const auto& s : sites.sites()) {
    if (!s.calls) continue;
    j[s.name()] = {{"a", quant_json(s.tel.a)}, {"b", quant_json(s.tel.b)}};
    if (swamping) {
      auto& o = j[s.name()];
      o["inner_adds"] = s.tel.inner_adds;
      o["inner_swamped"] = s.tel.inner_swamped;
      o["outer_adds"] = s.tel.outer_adds;
      o["outer_swamped"] = s.tel.outer_swamped;
    }
  }
  return j;
}

ojson class_metrics(const MatmulSites& sites) {
  std::array<QuantStats, 3> by{};
  std::array<bool, 3> seen{};
  for (const auto& s : sites.sites()) {
    if (!s.calls) continue;
    for (const auto& [cls, st] : {std::pair{s.a_class, &s.tel.a}, std::pair{s.b_class, &s.tel.b}}) {
      auto& acc = by[static_cast<size_t>(cls)];
      acc.elements += st->elements;
      acc.clipped += st->clipped;
      acc.flushed += st->flushed;
      acc.subnormal += st->subnormal;
      acc.amax = std::max(acc.amax, st->amax);
      seen[static_cast<size_t>(cls)] = true;
    }
  }
  ojson j = ojson::object();
  for (TensorClass c : {TensorClass::activation, TensorClass::weight, TensorClass::gradient}) {
    const auto& a = by[static_cast<size_t>(c)];
    if (!seen[static_cast<size_t>(c)]) continue;
    j[to_string(c)] = {{"elements", a.elements}, {"clipped", a.clipped}, {"flushed", a.flushed},
                       {"subnormal", a.subnormal}, {"amax", a.amax}};
  }
  return j;
}

std::string short_scale_blocks(const MatmulSites& sites) {
  std::string list;
  for (const auto& s : sites.sites()) {
    if (!s.calls) continue;
    for (const auto& [name, q, st] : {std::tuple{"a", &s.policy.a, &s.tel.a}, std::tuple{"b", &s.policy.b, &s.tel.b}}) {
      // (MX blocks: the e8m0 rule's; the format names their size)
      if (scale_kind_traits(q->scaling.kind).block_rule != BlockScaleRule::e8m0_exponent || st->scale_count == 0)
        continue;
      const uint64_t block = static_cast<uint64_t>(q->scaling.block) * (q->scaling.two_d ? q->scaling.block : 1);
      if (st->elements >= block * st->scale_count) continue;
      char b[160];
      std::snprintf(b, sizeof b, "%s%s.%s %.3g of %llu", list.empty() ? "" : ", ", s.name().c_str(), name,
                    static_cast<double>(st->elements) / static_cast<double>(st->scale_count),
                    static_cast<unsigned long long>(block));
      list += b;
    }
  }
  if (list.empty()) return "";
  return "MX scale blocks shorter than the format's, where the matmul's K is smaller than the block (or not a "
         "multiple of it); elements per block on average: " + list;
}

double RollingZ::z(double x) const {
  if (v_.size() < 2 || !std::isfinite(x)) return NAN;
  double mean = 0;
  for (double y : v_) mean += y;
  mean /= static_cast<double>(v_.size());
  double var = 0;
  for (double y : v_) var += (y - mean) * (y - mean);
  var /= static_cast<double>(v_.size());
  return var > 0 ? (x - mean) / std::sqrt(var) : NAN;
}

void RollingZ::push(double x) {
  if (!std::isfinite(x)) return;
  v_.push_back(x);
  if (v_.size() > window_) v_.pop_front();
}

void RollingZ::save(BlobWriter& w) const {
  w.vec(std::vector<double>(v_.begin(), v_.end()));
}

void RollingZ::restore(BlobReader& r) {
  const auto v = r.vec<double>();
  v_.assign(v.begin(), v.end());
}

ojson route_metrics(const MatmulSites& sites) {
  ojson j = ojson::object();
  for (const auto& s : sites.sites()) {
    if (s.routes.empty()) continue;
    ojson r = ojson::object();
    for (const auto& [route, calls] : s.routes) r[route] = calls;
    j[s.name()] = std::move(r);
  }
  return j;
}

}  // namespace drift
