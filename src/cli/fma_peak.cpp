// fma_peak.h's measurement. Compiled once per SIMD target (foreach_target.h); the best one runs.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cli/fma_peak.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cstddef>
#include <cstdio>
#include <string>

#include "backend/timing.h"
#include "cli/fma_peak.h"

#ifndef DRIFT_CLI_FMA_PEAK_SHARED
#define DRIFT_CLI_FMA_PEAK_SHARED
namespace drift::cli::fma_detail {
// Chains in flight: more than a multiply-add's latency (4 cycles) times the units that issue one
// (2 on current x86 cores), and few enough for 16-register targets to keep them with the constants.
constexpr size_t kChains = 12;
}  // namespace drift::cli::fma_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace drift::cli {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using fma_detail::kChains;

// `iters` rounds of kChains dependent multiply-adds, acc = acc * x + y, which settle at y / (1 - x) =
// 1 (no overflow, no subnormal: the rate is the units', not a slow path's). The sum is returned so
// that no chain is dead code.
HWY_NOINLINE float FmaBurst(size_t iters) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  V acc[kChains];
  for (size_t c = 0; c < kChains; ++c) acc[c] = hn::Set(d, static_cast<float>(c));
  const V x = hn::Set(d, 0.5f), y = hn::Set(d, 0.5f);
  for (size_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (size_t c = 0; c < kChains; ++c) acc[c] = hn::MulAdd(acc[c], x, y);
  }
  V sum = acc[0];
  for (size_t c = 1; c < kChains; ++c) sum = hn::Add(sum, acc[c]);
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

size_t FmaLanes() { return hn::Lanes(hn::ScalableTag<float>()); }
const char* FmaTarget() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace drift::cli
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift::cli {

HWY_EXPORT(FmaBurst);
HWY_EXPORT(FmaLanes);
HWY_EXPORT(FmaTarget);

double fma_peak_gflops(double min_seconds) {
  constexpr size_t kIters = size_t{1} << 18;  // a burst of 3M multiply-adds a lane: about a millisecond
  volatile float sink = 0;
  const double s = best_seconds_per_call([&] { sink = sink + HWY_DYNAMIC_DISPATCH(FmaBurst)(kIters); }, min_seconds);
  const double flops = 2.0 * static_cast<double>(kIters * fma_detail::kChains * HWY_DYNAMIC_DISPATCH(FmaLanes)());
  return flops / s * 1e-9;
}

std::string fma_peak_line(double gflops) {
  char line[200];
  std::snprintf(line, sizeof line,
                "this core: fp32 multiply-add peak %.1f GFLOP/s a thread (%s, %zu lanes; every FMA-bound figure here "
                "moves with it between phases of a shared machine)",
                gflops, HWY_DYNAMIC_DISPATCH(FmaTarget)(), HWY_DYNAMIC_DISPATCH(FmaLanes)());
  return line;
}

}  // namespace drift::cli
#endif  // HWY_ONCE
