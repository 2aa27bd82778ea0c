#include "arith/quantize.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include <omp.h>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/enum_names.h"
#include "arith/float_rows.h"
#include "arith/mx_cast.h"
#include "arith/ops.h"
#include "arith/parallel.h"
#include "arith/quantize_workspace.h"
#include "arith/random.h"
#include "arith/transpose.h"

namespace drift {
namespace {

const Format& fp32_format() {
  static const Format f = *find_format("fp32");
  return f;
}
const Format& e4m3_format() {
  static const Format f = *find_format("fp8_e4m3");
  return f;
}
using quant::ceil_log2;
using quant::finite;
using quant::floor_log2;
using quant::nearest_saturating;
double fp32_div(double a, double b) { return op_div(a, b, fp32_format(), nearest_saturating()); }

// microxcaling's "nearest" rounding with its sum in float32 (MxEmulation::nearest_sum_fp32): the
// element's magnitude is floor(RN_fp32(t + 1/2)) grid steps, t = |scaled| / (the element grid's
// spacing at |scaled|). The float32 sum rounds up to the next integer n + 1 exactly when t lies in
// [n + 1/2 - h, n + 1/2), h half the float32 spacing just below n + 1; everywhere else the result
// is rna's, `q`. The new magnitude is on the grid; round_to applies the quantizer's overflow rule.
double nearest_with_fp32_sum(double scaled, double q, const Quantizer& qz) {
  const Format& f = qz.format;
  const double a = abs_of(scaled);
  const int e = std::max(floor_log2(a), f.emin);
  const double step = pow2(e - f.man_bits);
  const double t = a / step;  // exact: a power of two
  const double whole = std::floor(t), frac = t - whole;  // both exact
  if (!(frac < 0.5)) return q;
  const double next = whole + 1;
  const double h = pow2(floor_log2(next) - (quant::is_pow2(next) ? 25 : 24));
  if (frac < 0.5 - h) return q;
  return round_to(sign_bit(scaled) ? -(next * step) : next * step, f, qz.round);
}

// microxcaling's element step after rounding (MxEmulation::element_step): the float32 sum of its
// nearest rounding (nearest_sum_fp32); with a float32 scale (scale_bits), the dequantised value
// q / mult is a float32, RN_fp32(q / mult) (a multiple of 2^-149 below 2^-126, inf above fp32's
// range), so the element becomes RN_fp32(q / mult) * mult (both products exact: mult is a power of
// two); with positive_zero every zero result is +0. The counts follow the value that results.
ElementOutcome mx_emulated_element(ElementOutcome o, double scaled, double mult, const Quantizer& qz) {
  const MxEmulation& emu = qz.scaling.emulate;
  const bool finite_in = quant::finite(scaled);
  if (emu.nearest_sum_fp32 && finite_in && scaled != 0) o.value = nearest_with_fp32_sum(scaled, o.value, qz);
  if (emu.scale_bits != 0 && quant::finite(o.value) && o.value != 0) {
    RoundSpec ieee;
    ieee.mode = Rounding::rne;
    ieee.overflow = Overflow::ieee;
    o.value = round_to(o.value / mult, fp32_format(), ieee) * mult;
  }
  uint8_t flags = o.flags & kElemClipped;
  if (finite_in && is_inf(o.value)) flags |= kElemClipped;  // the float32 dequantisation overflowed
  else if (finite_in && scaled != 0 && o.value == 0) flags |= kElemFlushed;
  if (o.value != 0 && quant::finite(o.value) && abs_of(o.value) < qz.format.min_normal) flags |= kElemSubnormal;
  o.flags = flags;
  if (emu.positive_zero && o.value == 0) o.value = 0.0;
  return o;
}

// Rounds one scaled element (quantize_scaled, shared with the CUDA quantizer) and counts what
// happened to it. `mult` is the multiplier the element was scaled by (for the emulated element step).
double quantize_element(double scaled, const Quantizer& qz, double mult, uint32_t rnd, QuantStats& st) {
  ElementOutcome o = quantize_scaled(scaled, qz.format, qz.round, rnd);
  if (qz.scaling.emulate.element_step()) o = mx_emulated_element(o, scaled, mult, qz);
  st.clipped += (o.flags & kElemClipped) != 0;
  st.flushed += (o.flags & kElemFlushed) != 0;
  st.subnormal += (o.flags & kElemSubnormal) != 0;
  return o.value;
}

// The region a scale covers: rows [r0, r1) x columns [c0, c1).
struct Region {
  size_t r0, r1, c0, c1;
};

// Largest finite magnitude in a region, and whether a NaN or inf is present. The region's share of
// the operand's input counts (amax, non-finite) goes into `counts` unless it is nullptr.
template <typename T>
double region_amax(const StridedInputOf<T>& x, const Region& g, bool* nonfinite, QuantStats* counts) {
  double amax = 0;
  uint64_t bad = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (x.cs == 1) {  // rows of contiguous floats (every operand once staged)
      for (size_t r = g.r0; r < g.r1; ++r) {
        const FloatRowCounts rc = float_row_counts(x.p + r * x.rs + g.c0, g.c1 - g.c0);
        bad += rc.nonfinite;
        amax = std::max(amax, static_cast<double>(rc.amax));
      }
    }
  }
  if (!std::is_same_v<T, float> || x.cs != 1) {
    for (size_t r = g.r0; r < g.r1; ++r)
      for (size_t c = g.c0; c < g.c1; ++c) {
        const double v = x.at(r, c);
        if (!finite(v)) ++bad;
        else amax = std::max(amax, abs_of(v));
      }
  }
  *nonfinite = bad != 0;
  if (counts) {
    counts->nonfinite += bad;
    counts->amax = std::max(counts->amax, amax);
  }
  return amax;
}

// Visits the scale regions of a rows x k operand: blocks of `b` along k, `rstep` rows deep (b for 2-D
// blocks; 1, or a span of whole rows, for 1-D ones): fn(region, stats, scratch). Row groups run in parallel; each thread counts into its own stats,
// merged at the end (the counts are integer sums and extrema, so the merge order cannot change
// them), and works in its own scratch of the workspace. `elements`: the work the pass does, which
// decides whether a team is worth it (0: rows x k; for_each_band passes its operand's).
template <typename Fn>
void for_each_region(size_t rows, size_t k, size_t b, size_t rstep, QuantStats& total, QuantizeWorkspace& ws, Fn fn,
                     size_t elements = 0) {
  const size_t groups = (rows + rstep - 1) / rstep;
  const size_t bk = std::max<size_t>(b, 1);
  auto visit = [&](size_t g0, size_t g1, QuantStats& local, QuantizeThreadScratch& scratch) {
    for (size_t gi = g0; gi < g1; ++gi) {
      const size_t r0 = gi * rstep;
      for (size_t c0 = 0; c0 < k; c0 += bk)
        fn(Region{r0, std::min(rows, r0 + rstep), c0, std::min(k, c0 + bk)}, local, scratch);
    }
  };
  if (!worth_threads_elements(elements ? elements : rows * k)) {  // small: on this thread, without entering OpenMP
    ws.fit_threads(1);
    QuantStats local;
    visit(0, groups, local, ws.threads[0]);
    total.merge(local);
    return;
  }
#pragma omp parallel
  {
#pragma omp single
    ws.fit_threads(static_cast<size_t>(omp_get_num_threads()));  // (the others wait at its end)
    QuantStats local;
    const size_t threads = static_cast<size_t>(omp_get_num_threads()), t = static_cast<size_t>(omp_get_thread_num());
    visit(groups * t / threads, groups * (t + 1) / threads, local, ws.threads[t]);
#pragma omp critical(drift_quantize_stats)
    total.merge(local);
  }
}

// The bands of a k-major pass (fn(band index, stats, scratch)), each band a region of its own: a
// grid of bands x 1 on for_each_region's threads, stats and scratch, the team decided on the
// operand's `elements` (the grid's own size never reaches the threshold).
template <typename Fn>
void for_each_band(size_t bands, size_t elements, QuantStats& total, QuantizeWorkspace& ws, Fn fn) {
  for_each_region(
      bands, 1, 1, 1, total, ws,
      [&](const Region& band, QuantStats& st, QuantizeThreadScratch& scratch) { fn(band.r0, st, scratch); }, elements);
}

// The input counts (amax, non-finite) in a pass of their own: for the scalings that need amax before
// they can quantize (tensor, nvfp4). The others count in their quantizing pass.
template <typename T>
void count_inputs(const StridedInputOf<T>& x, size_t rows, size_t k, QuantStats& st) {
  uint64_t nonfinite = 0;
  double amax = 0;
  // Walk in memory order (the operand may be stored either way round).
  const bool by_rows = x.cs <= x.rs;
  const size_t outer = by_rows ? rows : k, inner = by_rows ? k : rows;
  if constexpr (std::is_same_v<T, float>) {
    if ((by_rows ? x.cs : x.rs) == 1) {  // contiguous memory rows: their float counts
      const size_t ld = by_rows ? x.rs : x.cs;
      auto row = [&](size_t o, uint64_t& bad, double& top) {
        const FloatRowCounts rc = float_row_counts(x.p + o * ld, inner);
        bad += rc.nonfinite;
        top = std::max(top, static_cast<double>(rc.amax));
      };
      if (worth_threads_elements(rows * k)) {
#pragma omp parallel for schedule(static) reduction(+ : nonfinite) reduction(max : amax)
        for (size_t o = 0; o < outer; ++o) row(o, nonfinite, amax);
      } else {
        for (size_t o = 0; o < outer; ++o) row(o, nonfinite, amax);  // (kept out of OpenMP: arith/parallel.h)
      }
      st.nonfinite = nonfinite;
      st.amax = amax;
      return;
    }
  }
  auto line = [&](size_t o, uint64_t& bad, double& top) {
    for (size_t i = 0; i < inner; ++i) {
      const double v = by_rows ? x.at(o, i) : x.at(i, o);
      if (!finite(v)) ++bad;
      else top = std::max(top, abs_of(v));
    }
  };
  if (worth_threads_elements(rows * k)) {
#pragma omp parallel for schedule(static) reduction(+ : nonfinite) reduction(max : amax)
    for (size_t o = 0; o < outer; ++o) line(o, nonfinite, amax);
  } else {
    for (size_t o = 0; o < outer; ++o) line(o, nonfinite, amax);
  }
  st.nonfinite = nonfinite;
  st.amax = amax;
}

// fp32(x * mult) for the fp32 cast kernels (quantize_element.h, shared with the CUDA quantizer).
double scaled_value(double v, double mult, bool mult_exact_pow2) {
  return drift::scaled_value(v, mult, mult_exact_pow2, fp32_format());
}

// Row r of region g scaled, for contiguous float rows: scaled_value of every element as floats into
// in_w, and into `scaled` as doubles where the element path will read them (with_doubles, or a value
// that is not a float); *floats = whether every one is a float (or NaN). The float passes are SIMD
// (float_rows.h). Returns false (nothing decided) where the general element loop must run: other
// inputs, a multiplier that is neither a power of two nor a float, a NaN under such a float
// multiplier, or a float product that overflowed from a finite input (scaled_value then saturates).
template <typename T>
bool scale_float_row(const StridedInputOf<T>& x, size_t r, const Region& g, double mult, bool mult_exact_pow2,
                     bool with_doubles, double* scaled, float* in_w, bool* floats) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (x.cs != 1) return false;
    const float* src = x.p + r * x.rs + g.c0;
    const size_t len = g.c1 - g.c0;
    if (mult_exact_pow2 && mult >= 0x1p-126 && mult <= 0x1p126) {
      // mult and its inverse are floats: one float multiply gives the double product rounded to
      // float, exact when multiplying back returns the input (float_rows.h); the doubles only where
      // a product is not a float, for the element path.
      const bool exact = scale_floats_pow2(src, in_w, len, static_cast<float>(mult), static_cast<float>(1.0 / mult));
      if (!exact || with_doubles)
        for (size_t c = 0; c < len; ++c) scaled[c] = static_cast<double>(src[c]) * mult;
      *floats = exact;
      return true;
    }
    if (mult_exact_pow2) {  // (an extreme power) v * mult exact in double; a float where it fits one
      int inexact = 0;
      for (size_t c = 0; c < len; ++c) {
        const double v = static_cast<double>(src[c]) * mult;
        const float f = static_cast<float>(v);
        scaled[c] = v;
        in_w[c] = f;
        inexact |= (static_cast<double>(f) != v) & (v == v);
      }
      *floats = inexact == 0;
      return true;
    }
    const float mf = static_cast<float>(mult);
    if (static_cast<double>(mf) != mult) return false;
    // fp32(v * mult), one IEEE float multiply (f32_mul), as scaled_value; what scaled_value routes
    // elsewhere (a product that overflowed from a finite input, and NaN, which fails its float test
    // and takes the general multiply) sends the row to the element path.
    if (scale_floats(src, in_w, len, mf)) return false;
    if (with_doubles)
      for (size_t c = 0; c < len; ++c) scaled[c] = in_w[c];
    *floats = true;
    return true;
  }
}

// Scaled multiply then element rounding, as the TE / DeepSeek cast kernels do: fp32(x * mult), then
// the format. Each row of the region is rounded by the SIMD span cast when every scaled value is a
// float (bit-identical to the scalar core, tested), else element by element through round_to.
// With `count`, the region's input counts (amax, non-finite): from the same read on the element
// path, from a SIMD pass over the row (float_row_counts) on the float rows' path. `cast` is
// the span cast prepared for qz (nullptr when the format does not fit in float: no SIMD cast).
// `scratch` is the thread's: one row's scaled values, and the float input and output of the cast.
template <typename T>
void quantize_region_with_multiplier(const StridedInputOf<T>& x, size_t k, const Region& g, double mult,
                                     bool mult_exact_pow2, const Quantizer& qz, const SpanCast* cast, uint64_t seed,
                                     uint64_t stream, bool count, QuantizedOperand& out, QuantStats& st,
                                     QuantizeThreadScratch& scratch) {
  const size_t len = g.c1 - g.c0;
  const bool simd = cast != nullptr;
  // A float row multiplied by 1 is its own scaled value (and a float): the cast reads it in place.
  const bool in_place = std::is_same_v<T, float> && simd && mult_exact_pow2 && mult == 1.0 && x.cs == 1;
  scratch.fit_row(len);
  double* scaled = scratch.scaled.data();
  uint64_t nonfinite = 0;
  double amax = 0;
  // An fp32 element format that keeps subnormals casts every finite float to itself: a counted row
  // without NaN or inf is copied, and only its subnormals are counted (nothing clips or flushes).
  const bool identity = in_place && count && is_fp32_grid_kept(qz.format, qz.round);
  for (size_t r = g.r0; r < g.r1; ++r) {
    bool floats = simd;
    const float* in_f = scratch.in.data();
    bool copy_row = false;
    uint64_t row_sub = 0;
    if (in_place) {
      if constexpr (std::is_same_v<T, float>) {
        in_f = x.p + r * x.rs + g.c0;
        if (count) {
          const FloatRowCounts rc = float_row_counts(in_f, len);
          nonfinite += rc.nonfinite;
          amax = std::max(amax, static_cast<double>(rc.amax));
          copy_row = identity && rc.nonfinite == 0;
          row_sub = rc.subnormal;
        }
      }
    } else if (scale_float_row(x, r, g, mult, mult_exact_pow2, !simd, scaled, scratch.in.data(), &floats)) {
      floats = floats && simd;
      if constexpr (std::is_same_v<T, float>) {
        if (count) {  // (a second read of the row, in SIMD: delayed scaling counts every cast)
          const FloatRowCounts rc = float_row_counts(x.p + r * x.rs + g.c0, len);
          nonfinite += rc.nonfinite;
          amax = std::max(amax, static_cast<double>(rc.amax));
        }
      }
    } else {
      float* in_w = scratch.in.data();
      for (size_t c = 0; c < len; ++c) {
        const double v = x.at(r, g.c0 + c);
        if (count) {
          if (!finite(v)) ++nonfinite;
          else amax = std::max(amax, abs_of(v));
        }
        scaled[c] = scaled_value(v, mult, mult_exact_pow2);
        in_w[c] = static_cast<float>(scaled[c]);
        floats = floats && (static_cast<double>(in_w[c]) == scaled[c] || is_nan(scaled[c]));
      }
    }
    float* qf = out.in_float ? out.qf.data() + r * k + g.c0 : nullptr;
    double* q = out.in_float ? nullptr : out.q.data() + r * k + g.c0;
    if (copy_row) {
      if (qf) std::memcpy(qf, in_f, len * sizeof(float));
      else
        for (size_t c = 0; c < len; ++c) q[c] = in_f[c];
      st.subnormal += row_sub;
    } else if (floats) {
      float* out_f = qf ? qf : scratch.out.data();
      const CastStats cs = cast_span(*cast, in_f, out_f, len, seed, stream, r * k + g.c0);
      if (q)
        for (size_t c = 0; c < len; ++c) q[c] = out_f[c];
      st.clipped += cs.clipped;
      st.flushed += cs.flushed;
      st.subnormal += cs.subnormal;
    } else {
      RandomWords words(seed, stream);
      for (size_t c = 0; c < len; ++c) {
        const uint32_t rnd = qz.round.mode == Rounding::sr ? words.at(r * k + g.c0 + c) : 0;
        const double v = quantize_element(scaled[c], qz, mult, rnd, st);
        if (q) q[c] = v;
        else qf[c] = static_cast<float>(v);  // exact: the format's grid fits in float
      }
    }
  }
  if (count) {
    st.nonfinite += nonfinite;
    st.amax = std::max(st.amax, amax);
  }
}

// Rows [r0, r1) of an operand in 1-D blocks of b along k, element f of the span at span[f * x.cs]
// (more than one row only when they lie one after another there: x.cs == 1), each block scaled by
// its multiplier as quantize_region_with_multiplier scales it. Runs of consecutive blocks whose
// scaled values are all floats go to the SIMD cast in one call, across row ends (a cast call costs
// far more than the 16 or 32 elements of a block), or, for the MX presets' blocks, are scaled and
// cast in one pass; a block with a non-float scaled value is rounded element by element, as
// quantize_region_with_multiplier does. Element c of row r takes random word r*k + c in every
// case, and the counts are sums: how the rows are cut changes no bit and no count. The blocks, in
// row order, are scratch.blocks; the scratch is the thread's.
template <typename T>
void quantize_span_blocks(const T* span, const StridedInputOf<T>& x, size_t k, size_t r0, size_t r1, size_t b,
                          const Quantizer& qz, const SpanCast& cast, uint64_t seed, uint64_t stream,
                          QuantizedOperand& out, QuantStats& st, QuantizeThreadScratch& scratch) {
  const std::vector<QuantRowBlock>& blocks = scratch.blocks;
  const size_t e0 = r0 * k, n = (r1 - r0) * k, bpr = (k + b - 1) / b;  // span elements: [e0, e0 + n)
  scratch.fit_row(n);
  double* scaled = scratch.scaled.data();
  float* in_f = scratch.in.data();
  float* qf = out.in_float ? out.qf.data() + e0 : nullptr;
  double* q = out.in_float ? nullptr : out.q.data() + e0;
  // Scales the elements [c0, c1) of the span; true when every scaled value is a float (or NaN).
  auto scale_block = [&](size_t c0, size_t c1, double mult, bool exact) {
    bool floats = true;
    if constexpr (std::is_same_v<T, float>) {
      if (exact && x.cs == 1 && mult >= 0x1p-126 && mult <= 0x1p126) {
        // The common case (MX, float input): a float times a power of two is the double product
        // whenever that is a float, which holds exactly when multiplying back by the inverse power
        // (exact: no overflow, no underflow for a value this close to a float) returns the input.
        // Branch-free float work that vectorises; a block that fails the test (a product that would
        // round below fp32's normal range) gets its double products for the element path.
        const bool ok = scale_floats_pow2(span + c0, in_f + c0, c1 - c0, static_cast<float>(mult),
                                          static_cast<float>(1.0 / mult));  // (no NaN in a block scaled here)
        if (!ok)
          for (size_t c = c0; c < c1; ++c) scaled[c] = static_cast<double>(span[c]) * mult;
        return ok != 0;
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      // A float multiplier that is not a power of two (NVFP4's): fp32(x * mult), scaled_value's one
      // IEEE float multiply, in SIMD; a NaN or a product that overflowed from a finite input sends
      // the block to scaled_value below.
      const float mf = static_cast<float>(mult);
      if (!exact && x.cs == 1 && static_cast<double>(mf) == mult && !scale_floats(span + c0, in_f + c0, c1 - c0, mf))
        return true;
    }
    if (exact && x.cs == 1) {  // doubles (or an extreme power): one multiply by a power of two, vectorised
      for (size_t c = c0; c < c1; ++c) {
        const double v = static_cast<double>(span[c]) * mult;
        in_f[c] = static_cast<float>(v);
        scaled[c] = v;
        floats &= static_cast<double>(in_f[c]) == v || v != v;
      }
      return floats;
    }
    for (size_t c = c0; c < c1; ++c) {
      scaled[c] = scaled_value(span[c * x.cs], mult, exact);
      in_f[c] = static_cast<float>(scaled[c]);
      floats = floats && (static_cast<double>(in_f[c]) == scaled[c] || is_nan(scaled[c]));
    }
    return floats;
  };
  // Elements [c0, c1) one by one from their scaled values (a block that is not all floats).
  auto round_elements = [&](size_t c0, size_t c1, double mult) {
    RandomWords words(seed, stream);
    for (size_t c = c0; c < c1; ++c) {
      const uint32_t rnd = qz.round.mode == Rounding::sr ? words.at(e0 + c) : 0;
      const double v = quantize_element(scaled[c], qz, mult, rnd, st);
      if (q) q[c] = v;
      else qf[c] = static_cast<float>(v);  // exact: the format's grid fits in float
    }
  };
  if constexpr (std::is_same_v<T, float>) {
    // The MX presets' common case (float values in whole blocks, powers of two that are floats with
    // float inverses, a round-to-nearest-even cast into float storage): each block scaled and cast in
    // one pass (cast_blocks_scaled). A block it declines takes the element path, as below. (The
    // e8m0 range: an all-zero block's multiplier is 2^127, its inverse a subnormal float.)
    const size_t nb = blocks.size();
    bool fusable = qf && x.cs == 1 && n == nb * b && has_rne_kernel(cast);
    scratch.block_mult.resize(2 * nb);
    scratch.block_ok.resize(nb);
    float* mult = scratch.block_mult.data();
    float* inv = mult + nb;
    for (size_t bi = 0; bi < nb && fusable; ++bi) {
      const QuantRowBlock& blk = blocks[bi];
      fusable = blk.nan || (blk.exact && blk.mult >= 0x1p-127 && blk.mult <= 0x1p127);
      mult[bi] = blk.nan || !fusable ? 1.0f : static_cast<float>(blk.mult);  // (a NaN block's is not set)
      scratch.block_ok[bi] = !blk.nan;
    }
    if (fusable) {
      // (exact: a power of two in [2^-127, 2^127]; a loop of its own, which vectorises)
      for (size_t bi = 0; bi < nb; ++bi) inv[bi] = 1.0f / mult[bi];
      CastStats cs;
      if (cast_blocks_scaled(cast, span, qf, nb, b, mult, inv, scratch.block_ok.data(), &cs)) {
        st.clipped += cs.clipped;
        st.flushed += cs.flushed;
        st.subnormal += cs.subnormal;
        for (size_t bi = 0; bi < nb; ++bi) {
          if (scratch.block_ok[bi] || blocks[bi].nan) continue;  // (a NaN block is already marked)
          const size_t c0 = bi * b, c1 = c0 + b;
          for (size_t c = c0; c < c1; ++c) scaled[c] = static_cast<double>(span[c]) * blocks[bi].mult;
          round_elements(c0, c1, blocks[bi].mult);
        }
        return;
      }
    }
  }
  auto cast_run = [&](size_t c0, size_t c1) {
    if (c1 <= c0) return;
    float* dst = qf ? qf + c0 : scratch.out.data() + c0;
    const CastStats cs = cast_span(cast, in_f + c0, dst, c1 - c0, seed, stream, e0 + c0);
    if (q)
      for (size_t c = c0; c < c1; ++c) q[c] = dst[c - c0];
    st.clipped += cs.clipped;
    st.flushed += cs.flushed;
    st.subnormal += cs.subnormal;
  };
  size_t run = 0;  // start of the pending run of all-float blocks
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const size_t row_at = (bi / bpr) * k, c0 = row_at + (bi % bpr) * b, c1 = row_at + std::min(k, (bi % bpr + 1) * b);
    const QuantRowBlock& blk = blocks[bi];
    if (!blk.nan && scale_block(c0, c1, blk.mult, blk.exact)) continue;  // joins the run
    cast_run(run, c0);
    run = c1;
    if (blk.nan) continue;  // already marked NaN
    round_elements(c0, c1, blk.mult);
  }
  cast_run(run, n);
}

// The index in out.block_scale of the scale of region g's first row (g starts on a block boundary).
size_t first_block_of(const QuantizedOperand& out, const Region& g) {
  return g.r0 * out.blocks_per_row + g.c0 / out.block_k;
}

// Region g's scale s, its first row's at out.block_scale[first] (first_block_of).
void set_block_scale(QuantizedOperand& out, const Region& g, size_t first, double s) {
  for (size_t r = g.r0; r < g.r1; ++r) out.block_scale[first + (r - g.r0) * out.blocks_per_row] = s;
}

void mark_region_nan(QuantizedOperand& out, const Region& g) {
  for (size_t r = g.r0; r < g.r1; ++r)
    for (size_t c = g.c0; c < g.c1; ++c) {
      if (out.in_float) out.qf[r * out.k + c] = std::numeric_limits<float>::quiet_NaN();
      else out.q[r * out.k + c] = quiet_nan();
    }
  set_block_scale(out, g, first_block_of(out, g), quiet_nan());
}

}  // namespace

namespace {

// Adds `count` scales with exponents in [min, max] and exponent sum `sum` to st's scale statistics
// (its histogram aside): what QuantStats::merge and ScaleExpTally::into both do.
void add_scale_range(QuantStats& st, int min, int max, double sum, uint64_t count) {
  if (count == 0) return;
  st.scale_exp_min = st.scale_count ? std::min(st.scale_exp_min, min) : min;
  st.scale_exp_max = st.scale_count ? std::max(st.scale_exp_max, max) : max;
  st.scale_exp_sum += sum;  // exact (see QuantStats::scale_exp_sum)
  st.scale_count += count;
}

}  // namespace

void QuantStats::merge(const QuantStats& o) {
  elements += o.elements;
  clipped += o.clipped;
  flushed += o.flushed;
  subnormal += o.subnormal;
  nonfinite += o.nonfinite;
  amax = std::max(amax, o.amax);
  add_scale_range(*this, o.scale_exp_min, o.scale_exp_max, o.scale_exp_sum, o.scale_count);
  scale_exp_hist.merge(o.scale_exp_hist);
}

void ScaleExpHistogram::cover(int lo, int hi) {
  if (counts_.empty()) {
    lo_ = lo;
    counts_.assign(static_cast<size_t>(hi - lo + 1), 0);
    return;
  }
  const int old_hi = lo_ + static_cast<int>(counts_.size()) - 1;
  if (lo < lo_) {
    counts_.insert(counts_.begin(), static_cast<size_t>(lo_ - lo), 0);
    lo_ = lo;
  }
  if (hi > old_hi) counts_.resize(counts_.size() + static_cast<size_t>(hi - old_hi), 0);
}

void ScaleExpHistogram::add_outside(int e, uint64_t n) {
  cover(e, e);
  counts_[static_cast<size_t>(e - lo_)] += n;
}

void ScaleExpHistogram::merge(const ScaleExpHistogram& o) {
  if (o.counts_.empty()) return;
  cover(o.lo_, o.lo_ + static_cast<int>(o.counts_.size()) - 1);
  for (size_t i = 0; i < o.counts_.size(); ++i) counts_[static_cast<size_t>(o.lo_ - lo_) + i] += o.counts_[i];
}

uint64_t ScaleExpHistogram::count(int e) const {
  if (e < lo_ || e >= lo_ + static_cast<int>(counts_.size())) return 0;
  return counts_[static_cast<size_t>(e - lo_)];
}

void QuantizedOperand::reset_unscaled(size_t rows_, size_t k_) {
  rows = rows_;
  k = k_;
  block_k = 0;
  blocks_per_row = 0;
  block_scale.clear();
  tensor_scale = 1.0;
  stats = QuantStats{};
  k_major = false;
}

void QuantizedOperand::widen() {
  if (!in_float) return;
  if (k_major) {
    std::vector<float> scratch;
    to_row_major(scratch);
  }
  q.assign(qf.begin(), qf.begin() + static_cast<std::ptrdiff_t>(rows * k));
  in_float = false;
}

void QuantizedOperand::to_row_major(std::vector<float>& scratch) {
  if (!k_major) return;
  if (scratch.size() < rows * k) scratch.resize(rows * k);
  std::copy(qf.begin(), qf.begin() + static_cast<std::ptrdiff_t>(rows * k), scratch.begin());
  transpose_floats(scratch.data(), k, rows, rows, qf.data(), k, false);  // (k x rows into rows x k)
  k_major = false;
}

int mx_scale_exponent(double amax, const Format& elem, ExpRule rule) {
  Quantizer qz;
  qz.format = elem;
  qz.scaling.kind = ScaleKind::block;
  qz.scaling.rule = rule;
  return mx_exponent_of(amax, block_scale_spec(qz, 1.0));
}

// TE current scaling: scale = fp32(max / amax) / 2^margin, optionally truncated to a power of two.
double tensor_scale_from_amax(double amax, const Quantizer& qz) {
  const double a = std::max(amax, qz.scaling.amax_floor);
  double s = fp32_div(qz.format.max_finite, a) * std::ldexp(1.0, -qz.scaling.margin);
  s = round_to(s, fp32_format(), nearest_saturating());
  if (qz.scaling.pow2) s = std::ldexp(1.0, floor_log2(s));
  return s;
}

// NVFP4's second level: one fp32 scale for the tensor so the largest block scale fits e4m3.
double nvfp4_encode_scale(double amax, const Quantizer& qz) {
  return fp32_div(e4m3_format().max_finite * qz.format.max_finite, std::max(amax, qz.scaling.amax_floor));
}

double tensor_dequant_scale(double multiplier) { return fp32_div(1.0, multiplier); }

double tensor_level_multiplier(const Quantizer& qz, double amax, DelayedState* state) {
  switch (scale_kind_traits(qz.scaling.kind).tensor_rule) {
    case TensorScaleRule::none: return 1.0;
    case TensorScaleRule::current_amax: return tensor_scale_from_amax(amax, qz);
    case TensorScaleRule::amax_history: return delayed_scale_for_step(state);
    case TensorScaleRule::block_scale_range: return nvfp4_encode_scale(amax, qz);
  }
  return 1.0;
}

BlockScaleSpec block_scale_spec(const Quantizer& qz, double s_enc) {
  const Scaling& sc = qz.scaling;
  const BlockScaleRule rule = scale_kind_traits(sc.kind).block_rule;
  BlockScaleSpec s;
  s.method = rule;
  s.fp32 = fp32_format();
  s.rule = sc.rule;
  s.offset = sc.offset;
  s.emax = qz.format.emax;
  s.max_finite = qz.format.max_finite;
  s.amax_floor = sc.amax_floor;
  s.pow2 = sc.pow2;
  s.s_enc = s_enc;
  s.e4m3 = e4m3_format();
  const bool e8m0 = rule == BlockScaleRule::e8m0_exponent;
  if (e8m0) {
    s.emulate = sc.emulate;
    if (sc.emulate.exponent == ExpSource::log2_fp32) s.log2_table = log2_fp32_table();
  }
  if (e8m0 && sc.rule == ExpRule::rceil) s.rceil_rcp = fp32_div(1.0, qz.format.max_finite);
  if (e8m0 && sc.rule == ExpRule::even) {
    std::string err;
    s.even_format = *make_float_format(11, qz.format.kind == Kind::floating ? qz.format.man_bits : 0, 1023, true,
                                       NanCode::ieee, true, &err);
  }
  return s;
}

double delayed_scale_for_step(DelayedState* state) {
  if (!state) throw std::invalid_argument("delayed scaling needs a DelayedState");
  if (!state->initialised) {
    state->initialised = true;
    state->scale = 1.0;
  }
  return state->scale;
}

void delayed_record_step(DelayedState& state, const Quantizer& qz, double amax, uint64_t nonfinite) {
  // TE delayed scaling: this step's amax joins the history; the next step's scale comes from it.
  const Scaling& sc = qz.scaling;
  state.history.push_back(nonfinite ? quiet_nan() : amax);
  while (static_cast<int>(state.history.size()) > std::max(1, sc.history)) state.history.pop_front();
  double amax_h = state.history.back();
  if (sc.algo == AmaxAlgo::max) {
    amax_h = 0;
    for (double a : state.history) amax_h = (is_nan(a) || is_nan(amax_h)) ? quiet_nan() : std::max(amax_h, a);
  }
  if (finite(amax_h) && amax_h > 0) state.scale = tensor_scale_from_amax(amax_h, qz);
}

namespace {

// record_scale's minimum, maximum, sum and count of scale exponents over a run of blocks, kept in
// registers (a QuantStats, which a loop's stores might alias, would be read and written at every
// block), then added into a QuantStats once: the same figures in any grouping (the sum is of
// integers, exact).
struct ScaleExpTally {
  int min = 0, max = 0;
  int64_t sum = 0;
  uint64_t count = 0;
  void add(int e) {
    min = count ? std::min(min, e) : e;
    max = count ? std::max(max, e) : e;
    sum += e;
    ++count;
  }
  void into(QuantStats& st) const { add_scale_range(st, min, max, static_cast<double>(sum), count); }  // (exact)
};

// A scale of exponent e in the distribution (QuantStats::scale_exp_hist).
inline void add_to_histogram(QuantStats& st, int e) {
  st.scale_exp_hist.add(std::clamp(e, -QuantStats::kScaleExpOffset, QuantStats::kScaleExpOffset));
}

// Counts one scale of exponent e (record_scale's statistics).
inline void record_scale_exponent(QuantStats& st, int e) {
  ScaleExpTally one;
  one.add(e);
  one.into(st);
  add_to_histogram(st, e);
}

// Whether any of n counts is non-zero.
bool any_nonzero(const uint32_t* counts, size_t n) {
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) any |= counts[i];
  return any != 0;
}

// quantize_rows' plain_multiplier over a span's n blocks of finite float elements, from their
// amaxes, in one tight loop: each block's e8m0 scale into scale[bi] (the span's scales lie one
// after another in out.block_scale), its multiplier into blocks[bi], and their statistics (and the
// span's amax, unless its inputs were counted apart) into st.
void plain_scales_of_span(const float* amax, size_t n, const BlockScaleSpec& spec, bool counted_apart, double* scale,
                          QuantRowBlock* blocks, QuantStats& st) {
  ScaleExpTally tally;
  float span_amax = 0;
  for (size_t bi = 0; bi < n; ++bi) {
    const int e = plain_e8m0_exponent(amax[bi], spec);
    scale[bi] = pow2(e);
    blocks[bi] = QuantRowBlock{false, true, pow2(-e)};
    span_amax = std::max(span_amax, amax[bi]);
    if (amax[bi] != 0) {
      tally.add(e);
      add_to_histogram(st, e);
    }
  }
  tally.into(st);
  if (!counted_apart) st.amax = std::max(st.amax, static_cast<double>(span_amax));
}

// A one-pass MX kernel's counts (mx_cast.h) into st; the tensor's amax and NaN/inf count unless its
// inputs were counted apart.
void add_mx_tally(QuantStats& st, const MxCastTally& t, bool counted_apart) {
  st.clipped += t.cast.clipped;
  st.flushed += t.cast.flushed;
  st.subnormal += t.cast.subnormal;
  if (!counted_apart) {
    st.nonfinite += t.nonfinite;
    st.amax = std::max(st.amax, static_cast<double>(t.amax));
  }
  add_scale_range(st, t.e_min, t.e_max, static_cast<double>(t.e_sum), t.scales);  // (exact)
  if (t.scales)
    for (int e = t.e_min; e <= t.e_max; ++e)
      if (t.hist[e + 127]) st.scale_exp_hist.add(e, t.hist[e + 127]);
}

// Rows [r0, r1) of a float operand, contiguous from `span` in whole blocks of b, for the MX presets
// (plain_e8m0_floor) into out.qf by the one-pass kernel (mx_cast_blocks); the blocks it leaves are
// done here as quantize_span_blocks does them: a block with a NaN or inf marked NaN, a block whose
// scaled values would round below fp32's normal range element by element from its double products.
void quantize_span_mx(const float* span, size_t k, size_t r0, size_t r1, size_t b, int shift, const Quantizer& qz,
                      const SpanCast& cast, bool counted_apart, bool tally, QuantizedOperand& out, QuantStats& st,
                      QuantizeThreadScratch& scratch) {
  const size_t bpr = k / b, nblocks = (r1 - r0) * bpr, e0 = r0 * k;
  scratch.block_ok.resize(nblocks);
  uint8_t* status = scratch.block_ok.data();
  double* scale = &out.block_scale[r0 * bpr];
  MxCastTally t;
  mx_cast_blocks(cast, span, out.qf.data() + e0, nblocks, b, shift, scale, status, &t, tally);
  add_mx_tally(st, t, counted_apart);
  for (size_t bi = 0; bi < nblocks; ++bi) {
    if (status[bi] == kMxWritten) continue;
    const size_t r = r0 + bi / bpr, c0 = (bi % bpr) * b;
    if (status[bi] == kMxNonFinite) {
      mark_region_nan(out, Region{r, r + 1, c0, c0 + b});
      continue;
    }
    const double mult = 1.0 / scale[bi];  // (2^-e, exact; rne: no random word)
    for (size_t c = bi * b; c < (bi + 1) * b; ++c)
      out.qf[e0 + c] = static_cast<float>(quantize_element(static_cast<double>(span[c]) * mult, qz, mult, 0, st));
  }
}

}  // namespace

void record_scale(QuantStats& st, double dequant_scale) {
  int e;
  if (scale_exponent_of(dequant_scale, &e)) record_scale_exponent(st, e);
}

QuantizedOperand quantize(const double* x_in, size_t rows, size_t k, size_t ld, const Quantizer& qz, uint64_t seed,
                          uint64_t stream, DelayedState* state) {
  QuantizedOperand out;
  quantize_into(out, StridedInput{x_in, ld, 1}, rows, k, qz, seed, stream, state);
  return out;
}

namespace {

// Whether a quantizer's results can be made in an operand's k-major order (quantize_into's
// allow_k_major; the rest of the conditions are the data's): an element's result may not depend on
// its index (stochastic rounding's random word does), nor on neighbours along k other than through
// its 1-D block's scale, and block multipliers must be powers of two (quantize_blocks_k_major; an
// NVFP4 or a non-power-of-two tile scale would decline every call).
bool k_major_quantizer(const Quantizer& qz) {
  const Scaling& sc = qz.scaling;
  const BlockScaleRule rule = scale_kind_traits(sc.kind).block_rule;
  const bool pow2_blocks = rule == BlockScaleRule::none || rule == BlockScaleRule::e8m0_exponent ||
                           (rule == BlockScaleRule::fp32_ratio && sc.pow2);
  return fits_float(qz.format) && qz.round.mode != Rounding::sr && !sc.hadamard && !sc.two_d &&
         !sc.emulate.element_step() && pow2_blocks;
}

// An operand stored k-major (element (r, i) at x.p[i * x.cs]) in 1-D blocks of b along k, into
// out.qf in the same order (rows x k values, out's scales as usual): a band of b k-rows at a time,
// every column's block amax in one pass down the band (vertical SIMD), each column's scale and
// multiplier by quantize_rows' block_multiplier (stored and counted as in the usual order),
// the band scaled by a multiplier per column, then cast in one call. The same scales, values and
// counts as the usual order gives, where that takes no element path: a block with a NaN or inf, a
// multiplier that is not a power of two in float's normal range, or a scaled value that is not a
// float declines (false), and the caller quantizes in the usual order. Bands run in parallel.
template <class BlockMultiplier>
bool quantize_blocks_k_major(QuantizedOperand& out, const StridedInputF& x, size_t rows, size_t k, size_t b,
                             BlockMultiplier block_multiplier, bool counted_apart, const SpanCast& cast, uint64_t seed,
                             uint64_t stream, QuantizeWorkspace& ws) {
  const size_t n = rows, bands = out.blocks_per_row;
  std::atomic<bool> declined{false};
  for_each_band(bands, n * k, out.stats, ws, [&](size_t bi, QuantStats& st, QuantizeThreadScratch& scratch) {
    if (declined.load(std::memory_order_relaxed)) return;
    const size_t t0 = bi * b, h = std::min(k, t0 + b) - t0;
    scratch.fit_row(std::max(h * n, 2 * n));
    std::vector<float>& amax = scratch.block_amax;
    std::vector<uint32_t>& bad = scratch.block_bad;
    amax.resize(n);
    bad.resize(n);
    float_column_counts(x.p + t0 * x.cs, x.cs, h, n, amax.data(), bad.data());
    float* mult = scratch.out.data();
    float* inv = mult + n;
    for (size_t j = 0; j < n; ++j) {
      if (bad[j]) {
        declined = true;
        return;
      }
      if (!counted_apart) st.amax = std::max(st.amax, static_cast<double>(amax[j]));
      bool exact;
      const double m = block_multiplier(Region{j, j + 1, t0, t0 + h}, j * bands + bi, amax[j], st, &exact);
      if (!exact || !(m >= 0x1p-126 && m <= 0x1p126)) {
        declined = true;
        return;
      }
      mult[j] = static_cast<float>(m);
      inv[j] = static_cast<float>(1.0 / m);
    }
    float* scaled = scratch.in.data();
    for (size_t t = 0; t < h; ++t)
      if (!scale_floats_pow2_each(x.p + (t0 + t) * x.cs, scaled + t * n, n, mult, inv)) {
        declined = true;
        return;
      }
    const CastStats cs = cast_span(cast, scaled, out.qf.data() + t0 * n, h * n, seed, stream, 0);  // (no index: not sr)
    st.clipped += cs.clipped;
    st.flushed += cs.flushed;
    st.subnormal += cs.subnormal;
  });
  return !declined;
}

// quantize_blocks_k_major for the MX presets (plain_e8m0_floor) with an rne cast: each band of b
// k-rows by the one-pass kernel (mx_cast_band), which declines as quantize_blocks_k_major does (a
// NaN or inf, or a scaled value that would round) but takes an all-zero block, which
// quantize_blocks_k_major declines (its multiplier, 2^127, is past the range it accepts).
bool quantize_bands_mx(QuantizedOperand& out, const StridedInputF& x, size_t rows, size_t k, size_t b, int shift,
                       const SpanCast& cast, bool counted_apart, bool tally, QuantizeWorkspace& ws) {
  const size_t n = rows, bands = out.blocks_per_row;
  std::atomic<bool> declined{false};
  for_each_band(bands, n * k, out.stats, ws, [&](size_t bi, QuantStats& st, QuantizeThreadScratch&) {
    if (declined.load(std::memory_order_relaxed)) return;
    const size_t t0 = bi * b, h = std::min(k, t0 + b) - t0;
    MxCastTally t;
    if (!mx_cast_band(cast, x.p + t0 * x.cs, x.cs, h, n, shift, out.qf.data() + t0 * n, &out.block_scale[bi], bands,
                      &t, tally)) {
      declined = true;
      return;
    }
    add_mx_tally(st, t, counted_apart);
  });
  return !declined;
}

// Quantizes x (no Hadamard transform left to do) into `out`, whose storage is set up. With
// `k_major` (k_major_quantizer; x stored k-major, x.rs == 1), into out.qf in x's order, or false
// where the data declines it (quantize_blocks_k_major): out is then to be reset and quantized in the
// usual order. Without `tally` the MX one-pass kernels leave their counts out (quantize_into).
template <typename T>
bool quantize_rows(QuantizedOperand& out, const StridedInputOf<T>& x, size_t rows, size_t k, const Quantizer& qz,
                   uint64_t seed, uint64_t stream, DelayedState* state, QuantizeWorkspace& ws, bool k_major = false,
                   bool tally = true) {
  const Scaling& sc = qz.scaling;
  const ScaleKindTraits& kind = scale_kind_traits(sc.kind);
  out.stats.elements = rows * k;
  // The input counts (amax, non-finite): the kinds that need the tensor's amax before they quantize
  // (tensor, nvfp4) count in a pass of their own; the other kinds count in the pass that reads the input
  // to quantize it (each operand is read once). Counts are sums and maxima: the same either way.
  const bool counted_apart = kind.needs_tensor_amax();
  if (counted_apart) count_inputs(x, rows, k, out.stats);
  // The SIMD cast's constants, once per operand (not per block).
  // (None when microxcaling's element step is on: it runs on the element path, not in the SIMD cast.)
  std::optional<SpanCast> prepared;
  if (fits_float(qz.format) && !sc.emulate.element_step()) prepared = prepare_span_cast(qz.format, qz.round);
  const SpanCast* cast = prepared ? &*prepared : nullptr;
  if (!kind.blocked()) {
    // One multiplier for every element: 1 (exact) without a tensor rule.
    const bool unscaled = kind.tensor_rule == TensorScaleRule::none;
    const double s = tensor_level_multiplier(qz, out.stats.amax, state);
    // Element by element: k-major, the stored k-rows are the rows (the counts are sums and maxima).
    const StridedInputOf<T> v = k_major ? StridedInputOf<T>{x.p, x.cs, 1} : x;
    const size_t vrows = k_major ? k : rows, vk = k_major ? rows : k;
    for_each_region(vrows, vk, vk, 1, out.stats, ws, [&](const Region& g, QuantStats& st, QuantizeThreadScratch& scratch) {
      quantize_region_with_multiplier(v, vk, g, s, unscaled, qz, cast, seed, stream, !counted_apart, out, st, scratch);
    });
    if (!unscaled) {
      out.tensor_scale = tensor_dequant_scale(s);
      record_scale(out.stats, out.tensor_scale);
    }
    if (kind.keeps_history()) delayed_record_step(*state, qz, out.stats.amax, out.stats.nonfinite);
    return true;
  }
  const size_t b = static_cast<size_t>(sc.block);
  out.block_k = b;
  out.blocks_per_row = (k + b - 1) / b;
  out.block_scale.assign(rows * out.blocks_per_row, 1.0);
  // A two-level kind's block scales are computed under its tensor multiplier (s_enc).
  double s_enc = 1.0;
  if (kind.two_level()) {
    s_enc = tensor_level_multiplier(qz, out.stats.amax, state);
    out.tensor_scale = tensor_dequant_scale(s_enc);
  }
  const BlockScaleSpec spec = block_scale_spec(qz, s_enc);
  // A block's scale (stored, and recorded in st) and the multiplier its elements are scaled by
  // (*exact: a power of two, exact in double), from its amax (finite): block_scale_of, the
  // step the CUDA quantizer runs too. `first`: first_block_of(out, g), which the callers walking
  // the blocks in order know without its division.
  auto block_multiplier = [&](const Region& g, size_t first, double amax, QuantStats& st, bool* exact) -> double {
    const BlockScale bs = block_scale_of(spec, amax);
    set_block_scale(out, g, first, bs.stored);
    if (amax != 0 && tally) record_scale(st, bs.stored);
    *exact = bs.exact;
    return bs.mult;
  };
  // The same for the MX presets (plain_e8m0_floor) from the amax of float elements (a float): the
  // exponent from its bits, counted as an int (what block_scale_of and record_scale would give), by
  // plain_scales_of_span over this one block (a 1-D block: one row; its caller takes the amax).
  const bool plain_e8m0 = plain_e8m0_floor(spec);
  auto plain_multiplier = [&](const Region&, size_t first, double amax, QuantStats& st, bool* exact) -> double {
    const float amax_f = static_cast<float>(amax);
    QuantRowBlock block;
    plain_scales_of_span(&amax_f, 1, spec, true, &out.block_scale[first], &block, st);
    *exact = true;
    return block.mult;
  };
  const int mx_shift = spec.emax - spec.offset;  // (plain_e8m0_exponent's)
  if (k_major) {
    if constexpr (std::is_same_v<T, float>) {
      if (!cast) return false;
      if (plain_e8m0 && has_rne_kernel(*cast))
        return quantize_bands_mx(out, x, rows, k, b, mx_shift, *cast, counted_apart, tally, ws);
      return plain_e8m0 ? quantize_blocks_k_major(out, x, rows, k, b, plain_multiplier, counted_apart, *cast, seed,
                                                  stream, ws)
                        : quantize_blocks_k_major(out, x, rows, k, b, block_multiplier, counted_apart, *cast, seed,
                                                  stream, ws);
    }
    return false;
  }
  // (Each block's amax pass also takes its input counts, unless they were counted apart.)
  QuantStats* const no_counts = nullptr;
  if (sc.two_d || !cast) {
    for_each_region(rows, k, b, sc.two_d ? b : 1, out.stats, ws, [&](const Region& g, QuantStats& st, QuantizeThreadScratch& scratch) {
      bool nonfinite;
      const double amax = region_amax(x, g, &nonfinite, counted_apart ? no_counts : &st);
      if (nonfinite) {  // NaN/inf inside a block: the scale is NaN, the whole block reads as NaN
        mark_region_nan(out, g);
        return;
      }
      bool exact;
      const double mult = block_multiplier(g, first_block_of(out, g), amax, st, &exact);
      quantize_region_with_multiplier(x, k, g, mult, exact, qz, cast, seed, stream, false, out, st, scratch);
    });
  } else {
    // 1-D blocks with the SIMD cast: a span of rows' block scales first, then its elements in as
    // few cast calls as possible. Rows that lie one after another in memory, in whole blocks, go in
    // spans of about kSpan elements (a small operand's rows are short: the calls per row, not the
    // elements, would take the time); so do short float rows apart in memory (an attention head's
    // slice of a wider tensor), copied together into the thread's scratch a span at a time; other
    // rows go one at a time.
    constexpr size_t kSpan = 4096;
    const bool rows_adjoin = x.cs == 1 && x.rs == k && k % b == 0;
    const bool gather = std::is_same_v<T, float> && !rows_adjoin && x.cs == 1 && k % b == 0 && 2 * k <= kSpan;
    const size_t span_rows = rows_adjoin || gather ? std::max<size_t>(1, kSpan / std::max<size_t>(k, 1)) : 1;
    const size_t bpr = out.blocks_per_row;
    // The MX presets' common case: whole blocks of contiguous floats into float storage, rne.
    const bool mx_one_pass = std::is_same_v<T, float> && plain_e8m0 && out.in_float && x.cs == 1 && k % b == 0 &&
                             mx_cast_applies(*cast, b);
    for_each_region(rows, k, k, span_rows, out.stats, ws, [&](const Region& span, QuantStats& st, QuantizeThreadScratch& scratch) {
      const size_t nblocks = (span.r1 - span.r0) * bpr;
      std::vector<QuantRowBlock>& blocks = scratch.blocks;
      std::vector<float>& span_amax = scratch.block_amax;
      std::vector<uint32_t>& span_bad = scratch.block_bad;
      blocks.resize(nblocks);
      const T* span_p = x.p + span.r0 * x.rs;
      if constexpr (std::is_same_v<T, float>) {
        if (gather) {
          scratch.gathered.resize((span.r1 - span.r0) * k);
          for (size_t r = span.r0; r < span.r1; ++r)
            std::memcpy(&scratch.gathered[(r - span.r0) * k], x.p + r * x.rs, k * sizeof(float));
          span_p = scratch.gathered.data();
        }
        if (mx_one_pass) {
          quantize_span_mx(span_p, k, span.r0, span.r1, b, mx_shift, qz, *cast, counted_apart, tally, out, st, scratch);
          return;
        }
      }
      // Float rows' block amaxes in one SIMD pass (the same maxima and counts region_amax takes).
      bool span_counted = false;
      if constexpr (std::is_same_v<T, float>) {
        if (x.cs == 1) {  // (more than one row: adjoining or gathered)
          span_amax.resize(nblocks);
          span_bad.resize(nblocks);
          block_amax(span_p, (span.r1 - span.r0) * k, b, span_amax.data(), span_bad.data());
          span_counted = true;
        }
      }
      auto scale_span = [&](auto multiplier) {
        for (size_t bi = 0, r = span.r0, c0 = 0; bi < nblocks; ++bi) {  // (block bi: row r, columns from c0)
          const Region g{r, r + 1, c0, std::min(k, c0 + b)};
          c0 += b;
          if (c0 >= k) c0 = 0, ++r;
          bool nonfinite;
          double amax;
          if (span_counted) {
            amax = span_amax[bi];
            nonfinite = span_bad[bi] != 0;
            if (!counted_apart) {
              st.nonfinite += span_bad[bi];
              st.amax = std::max(st.amax, amax);
            }
          } else {
            amax = region_amax(x, g, &nonfinite, counted_apart ? no_counts : &st);
          }
          blocks[bi].nan = nonfinite;
          if (nonfinite) {
            mark_region_nan(out, g);
            continue;
          }
          blocks[bi].mult = multiplier(g, span.r0 * bpr + bi, amax, st, &blocks[bi].exact);
        }
      };
      if (span_counted && plain_e8m0 && !any_nonzero(span_bad.data(), nblocks))
        plain_scales_of_span(span_amax.data(), nblocks, spec, counted_apart, &out.block_scale[span.r0 * bpr],
                             blocks.data(), st);
      else if (span_counted && plain_e8m0) scale_span(plain_multiplier);  // (float amaxes)
      else scale_span(block_multiplier);
      quantize_span_blocks(span_p, x, k, span.r0, span.r1, b, qz, *cast, seed, stream, out, st, scratch);
    });
  }
  return true;
}

// The workspace's k-contiguous copy for T elements.
template <typename T>
std::vector<T>& staging_of(QuantizeWorkspace& ws) {
  if constexpr (std::is_same_v<T, float>) return ws.staged_f;
  else return ws.staged;
}

// Sets up `out` for rows x k values (in float when `in_float`) and quantizes x into it: through a
// copy for a Hadamard transform, or through a k-contiguous copy when x is stored the other way round.
template <typename T>
void quantize_into_impl(QuantizedOperand& out, const StridedInputOf<T>& x_in, size_t rows, size_t k,
                        const Quantizer& qz, uint64_t seed, uint64_t stream, DelayedState* state, bool in_float,
                        QuantizeWorkspace& ws, bool allow_k_major = false, bool tally = true) {
  if (allow_k_major && in_float && x_in.rs == 1 && x_in.cs != 1 && rows > 1 && k > 1 && k_major_quantizer(qz)) {
    // In the input's own order, unless the data declines it (then as below, from the start: the
    // declined attempt changed nothing but `out`; delayed scaling, the one kind with state, never
    // declines).
    out.reset_unscaled(rows, k);
    out.in_float = true;
    if (out.qf.size() < rows * k) out.qf.resize(rows * k);
    out.q.clear();
    if (quantize_rows(out, x_in, rows, k, qz, seed, stream, state, ws, true, tally)) {
      out.k_major = true;
      return;
    }
  }
  out.reset_unscaled(rows, k);
  out.in_float = in_float;
  // Every element is written below; reused storage is not cleared first.
  if (in_float) {
    // Grown, never shrunk: calls of every shape share this storage, and resizing down and up again
    // would zero the regrown part each time. Elements past rows * k are stale and never read.
    if (out.qf.size() < rows * k) out.qf.resize(rows * k);
    out.q.clear();
  } else {
    out.q.resize(rows * k);
    out.qf.clear();
  }
  const Scaling& sc = qz.scaling;

  if (sc.hadamard) {
    // The Hadamard transform works on a copy so the caller's tensor is untouched.
    std::vector<double>& rotated = ws.rotated;
    if (rotated.size() < rows * k) rotated.resize(rows * k);  // (every element written below)
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < k; ++c) rotated[r * k + c] = x_in.at(r, c);
    hadamard_rows(rotated.data(), rows, k, k, sc.hadamard, sc.hadamard_seed);
    quantize_rows(out, StridedInput{rotated.data(), k, 1}, rows, k, qz, seed, stream, state, ws);
  } else if (x_in.cs != 1 && rows > 1 && k > 1) {
    // An operand stored the other way round (k strided): the region loops read along k, so copy it
    // once into k-contiguous rows, in tiles that keep both sides in cache. Values only move.
    // 8 x 8 tiles through a local buffer: 8 source lines are read, then 8 destination lines written
    // (strides of a power-of-two size map every line of a tile to one cache set).
    std::vector<T>& staged = staging_of<T>(ws);
    if (staged.size() < rows * k) staged.resize(rows * k);
    T* dst = staged.data();
    constexpr size_t kT = 8;
    const StridedInputOf<T> src = x_in;
    if constexpr (std::is_same_v<T, float>) {
      if (src.rs == 1) {
        // 4 x 4 vector blocks; a large operand in chunks of 64 rows over a team (values only move).
        constexpr size_t kChunk = 64;
        for_each_chunk(rows, kChunk, worth_threads_elements(rows * k), [&](size_t r0, size_t nr) {
          transpose_floats(src.p + r0, k, nr, src.cs, dst + r0 * k, k, false);
        });
        quantize_rows(out, StridedInputOf<T>{dst, k, 1}, rows, k, qz, seed, stream, state, ws, false, tally);
        return;
      }
    }
    for_each_chunk(rows, kT, worth_threads_elements(rows * k), [&](size_t r0, size_t nr) {
      T buf[kT][kT];
      for (size_t c0 = 0; c0 < k; c0 += kT) {
        const size_t nc = std::min(kT, k - c0);
        for (size_t cc = 0; cc < nc; ++cc)
          for (size_t rr = 0; rr < nr; ++rr) buf[rr][cc] = src.p[(r0 + rr) * src.rs + (c0 + cc) * src.cs];
        for (size_t rr = 0; rr < nr; ++rr)
          for (size_t cc = 0; cc < nc; ++cc) dst[(r0 + rr) * k + c0 + cc] = buf[rr][cc];
      }
    });
    quantize_rows(out, StridedInputOf<T>{dst, k, 1}, rows, k, qz, seed, stream, state, ws, false, tally);
  } else {
    quantize_rows(out, x_in, rows, k, qz, seed, stream, state, ws, false, tally);
  }
}

}  // namespace

void quantize_into(QuantizedOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
                   uint64_t seed, uint64_t stream, DelayedState* state, QuantizeWorkspace* ws) {
  QuantizeWorkspace own;  // (used only when the caller passes no workspace)
  quantize_into_impl(out, x, rows, k, qz, seed, stream, state, false, ws ? *ws : own);
}

void quantize_into(QuantizedOperand& out, const StridedInputF& x, size_t rows, size_t k, const Quantizer& qz,
                   uint64_t seed, uint64_t stream, DelayedState* state, QuantizeWorkspace* ws, bool allow_k_major,
                   bool tally) {
  QuantizeWorkspace own;  // (used only when the caller passes no workspace)
  quantize_into_impl(out, x, rows, k, qz, seed, stream, state, fits_float(qz.format), ws ? *ws : own, allow_k_major,
                     tally);
}

void hadamard_rows(double* x, size_t rows, size_t k, size_t ld, int n, uint64_t seed) {
  if (n != 16 && n != 32) throw std::invalid_argument("hadamard size must be 16 or 32");
  const size_t groups = k / static_cast<size_t>(n);
  const uint32_t signs = hadamard_signs(n, seed);  // (quantize_element.h: every group's)
  for (size_t r = 0; r < rows; ++r)
    for (size_t g = 0; g < groups; ++g) hadamard_group_signed(x + r * ld + g * n, n, signs);
}

namespace {
const char* const kExpRuleNames[] = {"floor", "rceil", "ceil", "even"};
const char* const kExpSourceNames[] = {"exact", "log2_fp32"};
}  // namespace

const char* to_string(ExpRule r) { return enum_name(r, kExpRuleNames); }
const char* to_string(ExpSource s) { return enum_name(s, kExpSourceNames); }
bool parse_exp_rule(const std::string& s, ExpRule* out) { return enum_from_name(s, kExpRuleNames, out); }
bool parse_exp_source(const std::string& s, ExpSource* out) { return enum_from_name(s, kExpSourceNames, out); }

}  // namespace drift
