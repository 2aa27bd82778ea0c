// The fast matmul path, taken only where it is provably bit-identical to matmul_reference:
//   * inner and outer sums in fp32, rne, subnormals kept, sequential order, no fused model, no
//     product format: then every rounded step of the definition is one IEEE fp32 operation;
//   * operand values are floats, and a*b is exact inside an fma (or already exact in fp32 when the
//     two significands total at most 24 bits, which allows a separate multiply on targets without fma).
// Vectorised across N (each lane owns one output column and adds its own K sequence in order),
// register-tiled over 6 rows, OpenMP over row tiles: width and thread count cannot change a bit.
// Overflow is not modelled here: any non-finite result sends the whole call to the reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <omp.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/matmul_fast.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "arith/cast_span.h"
#include "arith/matmul.h"
#include "arith/matmul_random.h"
#include "arith/ops.h"

#ifndef DRIFT_MATMUL_FAST_SHARED
#define DRIFT_MATMUL_FAST_SHARED
namespace drift {
// Packed operands of one call, in floats: A as M x K, B as K x Npad (columns contiguous), scales as floats.
struct FastOperands {
  size_t m = 0, n = 0, npad = 0, k = 0, kblock = 0, nblocks = 0;
  const float* a = nullptr;        // m x k
  const float* b = nullptr;        // k x npad
  const float* sa = nullptr;       // m x nblocks (nullptr: all 1)
  const float* sb = nullptr;       // nblocks x npad (nullptr: all 1)
  float alpha = 1.0f;
  bool use_fma = false;            // products exact only inside an fma
  bool count_swamping = false;     // count adds that lost all of an addend (as the reference does)
  float* c = nullptr;              // m x npad
  uint64_t inner_swamped = 0, outer_swamped = 0;  // outputs of the counting variant
};
}  // namespace drift
#endif

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// acc + a*b with the product exact: a fused multiply-add where the target has one (Highway's
// MulAdd is fused exactly when HWY_NATIVE_FMA), else a multiply (exact by the caller's check) and an add.
template <class V>
HWY_INLINE V AccumulateProduct(V a, V b, V acc, bool use_fma) {
#if HWY_NATIVE_FMA
  (void)use_fma;
  return hn::MulAdd(a, b, acc);
#else
  (void)use_fma;  // matmul_fast refuses use_fma on targets without fma
  return hn::Add(acc, hn::Mul(a, b));
#endif
}

// Swamping, exactly as the reference counts it for r = fl(x + y): (y != 0 and r == x) or (x != 0 and
// r == y). Lanes of the mask add one each to `count` (int32 lanes; a lane sees at most K adds).
template <class D, class V, class VI>
HWY_INLINE VI CountSwamped(D d, V x, V y, V r, VI count) {
  const hn::RebindToSigned<D> di;
  const V zero = hn::Zero(d);
  // "!= 0" is written as not(== 0): Highway's Ne is an ordered compare, false for the NaN that
  // marks an inexact (hence non-zero) product.
  const auto lost_y = hn::AndNot(hn::Eq(y, zero), hn::Eq(r, x));
  const auto lost_x = hn::AndNot(hn::Eq(x, zero), hn::Eq(r, y));
  return hn::Sub(count, hn::BitCast(di, hn::VecFromMask(d, hn::Or(lost_y, lost_x))));
}

// The product as a float when it is exact (always, unless the fma path multiplies wide operands),
// else NaN, which compares unequal to everything: an inexact product cannot equal a float sum.
template <class D, class V>
HWY_INLINE V ExactProductOrNaN(D d, V a, V b, bool use_fma) {
  const V p = hn::Mul(a, b);
#if HWY_NATIVE_FMA
  if (use_fma) return hn::IfThenElse(hn::Eq(hn::MulAdd(a, b, hn::Neg(p)), hn::Zero(d)), p, hn::Set(d, NAN));
#else
  (void)d;
  (void)use_fma;
#endif
  return p;
}

constexpr size_t kRows = 6;  // 6 x 2 vectors: 12 accumulators + 2 B vectors + 1 broadcast fit 16 registers

// One tile: rows [i0, i0+rows) x columns [j0, j0 + 2 vectors).
template <bool kCount>
HWY_INLINE void Tile(const FastOperands& op, size_t i0, size_t rows, size_t j0, float* outer_buf, uint64_t* inner_sw,
                     uint64_t* outer_sw) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  const hn::RebindToSigned<decltype(d)> di;
  auto inner_count = hn::Zero(di), outer_count = hn::Zero(di);
  const bool scaled = op.sa || op.sb;
  const bool single = op.nblocks == 1 && !scaled;
  // outer_buf holds the outer sums of this tile between blocks (rows x 2L floats).
  for (size_t r = 0; r < kRows * 2 * L; ++r) outer_buf[r] = 0.0f;
  for (size_t bi = 0; bi < op.nblocks; ++bi) {
    const size_t k0 = bi * op.kblock, k1 = std::min(op.k, k0 + op.kblock);
    V acc[kRows][2];
    for (size_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = hn::Zero(d);
    const float* bp = op.b + k0 * op.npad + j0;
    if (kCount) {
      for (size_t t = k0; t < k1; ++t, bp += op.npad) {
        const V b0 = hn::LoadU(d, bp), b1 = hn::LoadU(d, bp + L);
        for (size_t r = 0; r < rows; ++r) {
          const V x = hn::Set(d, op.a[(i0 + r) * op.k + t]);
          for (size_t h = 0; h < 2; ++h) {
            const V bv = h ? b1 : b0;
            const V sum = AccumulateProduct(x, bv, acc[r][h], op.use_fma);
            inner_count = CountSwamped(d, acc[r][h], ExactProductOrNaN(d, x, bv, op.use_fma), sum, inner_count);
            acc[r][h] = sum;
          }
        }
      }
    } else if (rows == kRows) {
      // Full tile: kRows x 2 accumulators stay in registers for the whole block (constant trip
      // counts, unrolled by the compiler).
      const float* ar[kRows];
      for (size_t r = 0; r < kRows; ++r) ar[r] = op.a + (i0 + r) * op.k;
      for (size_t t = k0; t < k1; ++t, bp += op.npad) {
        const V b0 = hn::LoadU(d, bp), b1 = hn::LoadU(d, bp + L);
        for (size_t r = 0; r < kRows; ++r) {
          const V x = hn::Set(d, ar[r][t]);
          acc[r][0] = AccumulateProduct(x, b0, acc[r][0], op.use_fma);
          acc[r][1] = AccumulateProduct(x, b1, acc[r][1], op.use_fma);
        }
      }
    } else {
      for (size_t t = k0; t < k1; ++t, bp += op.npad) {
        const V b0 = hn::LoadU(d, bp), b1 = hn::LoadU(d, bp + L);
        for (size_t r = 0; r < rows; ++r) {
          const V x = hn::Set(d, op.a[(i0 + r) * op.k + t]);
          acc[r][0] = AccumulateProduct(x, b0, acc[r][0], op.use_fma);
          acc[r][1] = AccumulateProduct(x, b1, acc[r][1], op.use_fma);
        }
      }
    }
    for (size_t r = 0; r < rows; ++r)
      for (size_t h = 0; h < 2; ++h) {
        float* o = outer_buf + (r * 2 + h) * L;
        V t = acc[r][h];
        if (single) {
          hn::StoreU(t, d, o);  // outer = fp32(0 + inner) = inner
          continue;
        }
        if (scaled) {
          // s = fp32(sa * sb), then t = fp32(inner * s): two IEEE multiplies, never fused.
          const V sa = hn::Set(d, op.sa ? op.sa[(i0 + r) * op.nblocks + bi] : 1.0f);
          const V sb = op.sb ? hn::LoadU(d, op.sb + bi * op.npad + j0 + h * L) : hn::Set(d, 1.0f);
          t = hn::Mul(t, hn::Mul(sa, sb));
        }
        const V before = hn::LoadU(d, o);
        const V after = hn::Add(before, t);
        if (kCount) outer_count = CountSwamped(d, before, t, after, outer_count);
        hn::StoreU(after, d, o);
      }
  }
  if (kCount) {
    *inner_sw += static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, inner_count)));
    *outer_sw += static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, outer_count)));
  }
  for (size_t r = 0; r < rows; ++r)
    for (size_t h = 0; h < 2; ++h) {
      V y = hn::LoadU(d, outer_buf + (r * 2 + h) * L);
      if (op.alpha != 1.0f) y = hn::Mul(y, hn::Set(d, op.alpha));
      hn::StoreU(y, d, op.c + (i0 + r) * op.npad + j0 + h * L);
    }
}

void FastMatmul(FastOperands& op) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t row_tiles = (op.m + kRows - 1) / kRows;
  // Column panels keep a slice of B in cache while every row tile passes over it.
  const size_t panel = std::max<size_t>(2 * L, (size_t{64} * 1024 / sizeof(float) / std::max<size_t>(op.k, 1)) / (2 * L) * (2 * L));
  // One parallel region; each thread owns a fixed range of row tiles and walks the panels over it.
#pragma omp parallel
  {
    const size_t threads = static_cast<size_t>(omp_get_num_threads());
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    const size_t rt0 = row_tiles * t / threads, rt1 = row_tiles * (t + 1) / threads;
    std::vector<float> buf(kRows * 2 * L);
    uint64_t inner_sw = 0, outer_sw = 0;
    for (size_t p0 = 0; p0 < op.npad; p0 += panel) {
      const size_t p1 = std::min(op.npad, p0 + panel);
      for (size_t rt = rt0; rt < rt1; ++rt) {
        const size_t i0 = rt * kRows, rows = std::min(kRows, op.m - i0);
        for (size_t j0 = p0; j0 < p1; j0 += 2 * L) {
          if (op.count_swamping) Tile<true>(op, i0, rows, j0, buf.data(), &inner_sw, &outer_sw);
          else Tile<false>(op, i0, rows, j0, buf.data(), &inner_sw, &outer_sw);
        }
      }
    }
#pragma omp atomic
    op.inner_swamped += inner_sw;
#pragma omp atomic
    op.outer_swamped += outer_sw;
  }
}

bool HasNativeFma() { return HWY_NATIVE_FMA != 0; }
size_t FloatLanes() { return hn::Lanes(hn::ScalableTag<float>()); }

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {
HWY_EXPORT(FastMatmul);
HWY_EXPORT(HasNativeFma);
HWY_EXPORT(FloatLanes);

bool matmul_fast(const PreparedOperands& ops, double* c, size_t ldc, const MatmulPolicy& policy,
                 const MatmulContext& ctx, MatmulTelemetry& tel) {
  if (policy.product_format || !is_plain_fp32_sequential(policy.inner) || !is_plain_fp32_sequential(policy.outer)) return false;
  if (!fits_float(policy.a.format) || !fits_float(policy.b.format)) return false;
  const bool exact_in_float = significand_bits(policy.a.format) + significand_bits(policy.b.format) <= 24;
  const bool native_fma = HWY_DYNAMIC_DISPATCH(HasNativeFma)();
  if (!exact_in_float && !native_fma) return false;
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  const size_t m = A.rows, n = B.rows, k = A.k;
  if (m == 0 || n == 0) return true;
  const size_t L = HWY_DYNAMIC_DISPATCH(FloatLanes)();
  FastOperands op;
  op.m = m;
  op.n = n;
  op.k = k;
  op.npad = (n + 2 * L - 1) / (2 * L) * (2 * L);
  op.kblock = ops.kblock;
  op.nblocks = k == 0 ? 0 : (k + ops.kblock - 1) / ops.kblock;
  op.use_fma = !exact_in_float;
  op.count_swamping = ctx.count_swamping;
  // Any NaN/inf among the operands or scales goes to the reference (overflow rules live there).
  auto all_finite = [](const std::vector<double>& v) {
    for (double x : v)
      if (is_nan(x) || is_inf(x)) return false;
    return true;
  };
  if (!all_finite(A.q) || !all_finite(B.q) || !all_finite(A.block_scale) || !all_finite(B.block_scale)) return false;
  if (ctx.count_swamping) {
    // The counting kernel tells a product's exactness from an fma residual, which is exact only
    // while the product stays above 2^-100 (no underflow); tinier products go to the reference.
    auto min_nonzero = [](const std::vector<double>& v) {
      double m = 1e300;
      for (double x : v)
        if (x != 0) m = std::min(m, abs_of(x));
      return m;
    };
    if (min_nonzero(A.q) * min_nonzero(B.q) < 0x1p-100) return false;
  }
  // Per-thread scratch, grown and never cleared: every element read below is written first.
  static thread_local std::vector<float> a_buf, b_buf, c_buf;
  if (a_buf.size() < m * k) a_buf.resize(m * k);
  if (b_buf.size() < k * op.npad) b_buf.resize(k * op.npad);
  if (c_buf.size() < m * op.npad) c_buf.resize(m * op.npad);
  float* a = a_buf.data();
  float* b = b_buf.data();
  float* cbuf = c_buf.data();
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < m * k; ++i) a[i] = static_cast<float>(A.q[i]);
  // B (N x K) to K x Npad, in 32 x 32 tiles; the padding lanes are zero.
  constexpr size_t T = 32;
#pragma omp parallel for schedule(static)
  for (size_t t0 = 0; t0 < k; t0 += T) {
    const size_t t1 = std::min(k, t0 + T);
    for (size_t j0 = 0; j0 < n; j0 += T)
      for (size_t t = t0; t < t1; ++t)
        for (size_t j = j0; j < std::min(n, j0 + T); ++j) b[t * op.npad + j] = static_cast<float>(B.q[j * k + t]);
    for (size_t t = t0; t < t1; ++t)
      for (size_t j = n; j < op.npad; ++j) b[t * op.npad + j] = 0.0f;
  }
  op.a = a;
  op.b = b;
  // Block scales in float (every scale kind yields fp32-representable scales: e8m0, e4m3, fp32).
  std::vector<float> sa, sb;
  auto scale_of = [&](const QuantizedOperand& Q, size_t row, size_t bi) {
    return Q.block_k ? Q.block_scale[row * Q.blocks_per_row + (bi * ops.kblock) / Q.block_k] : 1.0;
  };
  if (A.block_k) {
    sa.resize(m * op.nblocks);
    for (size_t i = 0; i < m; ++i)
      for (size_t bi = 0; bi < op.nblocks; ++bi) sa[i * op.nblocks + bi] = static_cast<float>(scale_of(A, i, bi));
    op.sa = sa.data();
  }
  if (B.block_k) {
    sb.assign(op.nblocks * op.npad, 1.0f);
    for (size_t j = 0; j < n; ++j)
      for (size_t bi = 0; bi < op.nblocks; ++bi) sb[bi * op.npad + j] = static_cast<float>(scale_of(B, j, bi));
    op.sb = sb.data();
  }
  const double alpha = A.tensor_scale * B.tensor_scale == 1.0
                           ? 1.0
                           : op_mul(A.tensor_scale, B.tensor_scale, policy.outer.format, policy.outer.round);
  op.alpha = static_cast<float>(alpha);
  op.c = cbuf;
  if (k > 0) HWY_DYNAMIC_DISPATCH(FastMatmul)(op);  // fills op.inner_swamped / outer_swamped when counting
  else std::fill(cbuf, cbuf + m * op.npad, 0.0f);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      const float y = cbuf[i * op.npad + j];
      if (std::isnan(y) || std::isinf(y)) return false;  // overflow: the reference decides
    }
  // Output rounding. An fp32 output that keeps subnormals leaves every finite float unchanged.
  const Format& of = policy.out_format;
  const bool out_is_identity = of.kind == Kind::floating && of.exp_bits == 8 && of.man_bits == 23 && of.bias == 127 &&
                               of.subnormals && policy.out_round.subnormals == Subnormals::keep;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      const double y = cbuf[i * op.npad + j];
      // Stochastic output rounding draws the reference's word (stream kStreamOut, index i*N + j).
      const uint32_t rnd = policy.out_round.mode == Rounding::sr
                               ? random_u32(ctx.seed, ctx.stream ^ (kStreamOut << 56), i * n + j)
                               : 0;
      c[i * ldc + j] = out_is_identity ? y : round_to(y, of, policy.out_round, rnd);
    }
  // Adds performed (swamping is counted only by the reference path).
  tel.swamping_counted = ctx.count_swamping;
  tel.inner_swamped += op.inner_swamped;
  tel.outer_swamped += op.outer_swamped;
  tel.inner_adds += m * n * k;
  tel.outer_adds += m * n * op.nblocks;  // the reference adds every block term into the outer sum, from +0
  return true;
}

}  // namespace drift
#endif  // HWY_ONCE
