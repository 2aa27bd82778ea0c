// The fast matmul path, taken only where it is provably bit-identical to matmul_reference:
//   * outer sum in fp32, rne, subnormals kept, sequential order; no product format;
//   * inner sum either
//       - fp32 rne sequential (subnormals kept): every rounded step of the definition is one IEEE fp32
//         operation, a*b exact inside an fma (or exact in fp32 when the two significands total at most
//         24 bits and the data keeps the products inside fp32's range: a separate multiply is then
//         exact too, which allows targets without fma); or
//       - a narrow accumulator (bf16, fp16, any float format of at most 22 significand bits and
//         fp32's normal exponent range), rne or rtz, sequential or reverse: each product is exact in
//         fp32 (checked on the data), the running sum s + p is computed exactly as a TwoSum pair
//         (hi, lo), rounded to odd at fp32 precision (hi moved one unit toward lo when lo != 0 and hi
//         is even), then rounded once to the narrow format by integer operations on the float bits.
//         Rounding to odd at p >= q + 2 bits, then to q bits, equals one rounding of the exact sum
//         (Boldo and Melquiond 2008) in the narrow format's normal range; lanes whose sum falls below
//         its smallest normal, or beyond its largest finite value (overflow rules), or outside
//         fp32's range, are redone one by one with the scalar core (op_add), as the reference does.
//         On AVX-512 the plain kernel gets the round-to-odd sum from two fmas with the instruction's
//         own rounding direction instead, and skips the range tests narrow_checks proves cannot fire
//         (matmul_narrow-inl.h, narrow_range.h); or
//       - a fused tensor-core model (fused_accum.h) whose cut terms add exactly in a double: where
//         the products are exact in fp32 and each cut term fits an int32 (every preset), each cut
//         term by a float multiply and a conversion toward zero, added in int32 lanes (float lanes
//         on AVX-512 and AVX2), else each truncated in double lanes (matmul_fused-inl.h).
// The fp32 kernel's calls on FP8/FP6/FP4/int8 operands, and on bf16 operands whose data allow, take
// the pair kernel where the CPU has AVX512_BF16 (arith/matmul_pairs.h: two of its fma steps per
// instruction, the same roundings).
// Vectorised across N (each lane owns one output column and adds its own K sequence in order),
// register-tiled over 6 rows, OpenMP over row tiles: width and thread count cannot change a bit.
// B is packed into column strips (K x 2 vectors, contiguous) so the kernel streams it. Operands come
// quantized as doubles (q) or, from the float entry, as floats (qf): A in floats is already the
// kernel's layout and is read in place. Calls too small to repay an OpenMP team run on one thread
// (arith/parallel.h); the tiles' results do not depend on which thread computes them.
// Any non-finite result sends the whole call to the reference (whose overflow rules decide).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <omp.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/matmul_fast.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "arith/cast_span.h"
#include "arith/matmul.h"
#include "arith/matmul_in_place.h"
#include "arith/matmul_pairs.h"
#include "arith/matmul_workspace.h"
#include "arith/matmul_random.h"
#include "arith/ops.h"
#include "arith/parallel.h"
#include "arith/random.h"
#include "arith/transpose.h"

#include "arith/matmul_fast_shared.h"
#include "arith/narrow_range.h"

// The narrow-accumulator add and the fused model, per target.
#include "arith/matmul_narrow-inl.h"
#include "arith/matmul_fused-inl.h"

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

// The fp32 kernel's steps k0..k1 for R rows from i0 (rows of them real), the sums continued in
// acc: R x 2 accumulators stay in registers (constant trip counts, unrolled by the compiler). A
// partial tile repeats its last real row in the rows it lacks: their sums are never stored, and a
// loop over `rows` would put the accumulators in memory.
template <size_t R, class D, class V = hn::Vec<D>>
HWY_INLINE void Fp32Steps(D d, const FastOperands& op, size_t i0, size_t rows, size_t k0, size_t k1, const float* strip,
                          V (&acc)[R][2]) {
  const size_t L = hn::Lanes(d);
  const float* ar[R];
  for (size_t r = 0; r < R; ++r) ar[r] = op.a + (i0 + std::min(r, rows - 1)) * op.lda;
  // (A by rows, a_col 1, in a loop of its own: a column step in the address cost the row-major
  // kernel about 2% in `drift bench gemm`.)
  auto steps = [&](auto by_rows) {
    const size_t step = op.b_row, a_col = decltype(by_rows)::value ? 1 : op.a_col;
    const float* bp = strip + k0 * step;
    for (size_t t = k0; t < k1; ++t, bp += step) {
      const V b0 = hn::LoadU(d, bp), b1 = hn::LoadU(d, bp + L);
      for (size_t r = 0; r < R; ++r) {
        const V x = hn::Set(d, ar[r][t * a_col]);
        acc[r][0] = AccumulateProduct(x, b0, acc[r][0], op.use_fma);
        acc[r][1] = AccumulateProduct(x, b1, acc[r][1], op.use_fma);
      }
    }
  };
  if (op.a_col == 1)
    steps(std::true_type{});
  else
    steps(std::false_type{});
}

// Block bi's scale of a tile's row r (a row past a partial tile's end reads its last row's: never
// stored), and of the tile's column vector h; 1 for an operand without block scales.
template <class D>
HWY_INLINE hn::Vec<D> BlockRowScale(D d, const FastOperands& op, size_t i0, size_t rows, size_t r, size_t bi) {
  return hn::Set(d, op.sa ? op.sa[(i0 + std::min(r, rows - 1)) * op.nblocks + bi] : 1.0f);
}
template <class D>
HWY_INLINE hn::Vec<D> BlockColScale(D d, const FastOperands& op, size_t j0, size_t h, size_t bi) {
  return op.sb ? hn::LoadU(d, op.sb + bi * op.npad + j0 + h * hn::Lanes(d)) : hn::Set(d, 1.0f);
}

// The inner sums of one block for a tile: acc[r][h] for rows [i0, i0+rows), columns of strip `bp`.
template <bool kCount, FastInner kInner, class D, class V = hn::Vec<D>, class VI>
HWY_INLINE void InnerBlock(D d, const FastOperands& op, size_t i0, size_t rows, size_t j0, size_t k0, size_t k1,
                           const float* strip, V (&acc)[kRows][2], VI& inner_count) {
  const size_t L = hn::Lanes(d);
  for (size_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = hn::Zero(d);
  if constexpr (kInner == FastInner::fused) {
    // The fused model, in float lanes where the plan packed for them, else in double lanes; its
    // results lie on the output format's grid, floats.
    const FusedPlan& plan = (k1 - k0 == op.kblock || !op.fused.plan_tail) ? *op.fused.plan_full : *op.fused.plan_tail;
    HWY_ALIGN float res[kRows * 2 * HWY_MAX_BYTES / sizeof(float)];
    if constexpr (kFusedFloatLanes) {
      if (op.fused.float_lanes) FusedTileBlock<kRows, 1>(d, op, i0, rows, j0, k0, plan, res);
    }
    if (!op.fused.float_lanes) FusedTileBlock<kRows, 1>(hn::Repartition<double, D>(), op, i0, rows, j0, k0, plan, res);
    for (size_t r = 0; r < rows; ++r) {
      acc[r][0] = hn::Load(d, res + r * 2 * L);
      acc[r][1] = hn::Load(d, res + r * 2 * L + L);
    }
    (void)inner_count;
    return;
  }
  if constexpr (kInner != FastInner::fp32) {
    // Narrow accumulator: each add is exact-then-rounded; the K order is ascending or descending.
    if constexpr (!kCount) {
      // A partial tile is padded with rows of zeros (sums that stay zero, never out of range, never
      // stored): the whole tile then runs in registers.
      const float* ar[kRows];
      for (size_t r = 0; r < kRows; ++r) ar[r] = r < rows ? op.a + (i0 + r) * op.lda : op.narrow.zero_row;
      NarrowBlock<kInner>(op.narrow, ar, strip, k0, k1, acc);
      return;
    }
    const bool rev = op.narrow.reverse;
    for (size_t n = k0; n < k1; ++n) {
      const size_t t = rev ? k0 + k1 - 1 - n : n;
      const float* bp = strip + t * 2 * L;
      const V b0 = hn::LoadU(d, bp), b1 = hn::LoadU(d, bp + L);
      for (size_t r = 0; r < rows; ++r) {
        const V x = hn::Set(d, op.a[(i0 + r) * op.lda + t]);
        for (size_t h = 0; h < 2; ++h) {
          const V p = hn::Mul(x, h ? b1 : b0);  // exact (matmul_fast checked the data)
          const V sum = NarrowAdd<kInner>(d, op.narrow, acc[r][h], p);
          if (kCount) inner_count = CountSwamped(d, acc[r][h], p, sum, inner_count);
          acc[r][h] = sum;
        }
      }
    }
    return;
  }
  const float* bp = strip + k0 * op.b_row;
  if (kCount) {
    for (size_t t = k0; t < k1; ++t, bp += op.b_row) {
      const V b0 = hn::LoadU(d, bp), b1 = hn::LoadU(d, bp + L);
      for (size_t r = 0; r < rows; ++r) {
        const V x = hn::Set(d, op.a[(i0 + r) * op.lda + t * op.a_col]);
        for (size_t h = 0; h < 2; ++h) {
          const V bv = h ? b1 : b0;
          const V sum = AccumulateProduct(x, bv, acc[r][h], op.use_fma);
          inner_count = CountSwamped(d, acc[r][h], ExactProductOrNaN(d, x, bv, op.use_fma), sum, inner_count);
          acc[r][h] = sum;
        }
      }
    }
  } else {
    Fp32Steps(d, op, i0, rows, k0, k1, strip, acc);
  }
}

// Stores y (row r of a tile, vector h) into C: a whole vector, except in a last strip that runs past
// n, whose columns up to n are copied from a vector store (never a wider write: the row's neighbour
// belongs to another tile or thread). A non-finite result (padding columns sum zeros, so only real
// ones) is flagged in `bad`.
template <class D, class V = hn::Vec<D>, class M>
HWY_INLINE void StoreResult(D d, const FastOperands& op, size_t i, size_t j, V y, M& bad) {
  const size_t L = hn::Lanes(d);
  if (op.alpha != 1.0f) y = hn::Mul(y, hn::Set(d, op.alpha));
  bad = hn::Or(bad, hn::Not(hn::Le(hn::Abs(y), hn::Set(d, 0x1.fffffep127f))));
  float* dst = op.c + i * op.ldc + j;
  if (j + L <= op.n) {
    hn::StoreU(y, d, dst);
  } else if (j < op.n) {
    HWY_ALIGN float lanes[HWY_MAX_BYTES / sizeof(float)] = {};
    hn::Store(y, d, lanes);
    for (size_t l = 0; l < op.n - j; ++l) dst[l] = lanes[l];
  }
}

// Stores a tile's results into C: `vectors` vectors per row, vector h of row r given by result(r, h),
// and flags a non-finite one.
template <class D, class Result>
HWY_INLINE void StoreTile(D d, const FastOperands& op, size_t i0, size_t rows, size_t j0, size_t vectors, Result result,
                          bool* nonfinite) {
  const size_t L = hn::Lanes(d);
  auto bad = hn::Lt(hn::Zero(d), hn::Zero(d));  // all false
  for (size_t r = 0; r < rows; ++r)
    for (size_t h = 0; h < vectors; ++h) StoreResult(d, op, i0 + r, j0 + h * L, result(r, h), bad);
  if (!hn::AllFalse(d, bad)) *nonfinite = true;
}

// One tile of a call whose sum is one unscaled block (every plain fp32 or narrow call without
// promotion), not counting: the outer sum is +0 + the inner sum (fp32(+0 + -0) is +0, as in the
// reference), taken in registers. (A function of its own: folded into Tile as an early branch, it
// cost the many-block kernel (MX) a third of its speed in register allocation.)
template <FastInner kInner>
HWY_NOINLINE void TileOneBlock(const FastOperands& op, size_t i0, size_t rows, size_t j0, bool* nonfinite) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  const hn::RebindToSigned<decltype(d)> di;
  auto inner_count = hn::Zero(di);
  const float* strip = op.b ? op.b + (j0 / (2 * L)) * op.b_strip : nullptr;  // no float B for the fused model
  V acc[kRows][2];
  InnerBlock<false, kInner>(d, op, i0, rows, j0, 0, op.k, strip, acc, inner_count);
  StoreTile(d, op, i0, rows, j0, 2, [&](size_t r, size_t h) { return hn::Add(hn::Zero(d), acc[r][h]); }, nonfinite);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// TileOneBlock's fp32 kernel (fma) over twice a tile's rows: 2 x kRows x 2 accumulators fill most
// of AVX-512's 32 registers, and each B vector loaded serves twice the rows (a strip of B, k x 2
// vectors, is read half as often); the same steps in the same order for every result. Only for
// one-block sums: a many-block sum (MX) would have to keep its outer sums in memory here, and Tile,
// which keeps both in registers, ran 8-14% faster on MX shapes (`drift bench gemm`, mxfp8_e4m3,
// 1 thread, three runs in turns: 1024x512x128 1.35-1.37 -> 1.53-1.55 of sgemm, 512^3 0.59-0.62 ->
// 0.66-0.67).
constexpr size_t kWideRows = 2 * kRows;
HWY_NOINLINE void Fp32TileWide(const FastOperands& op, size_t i0, size_t rows, size_t j0, bool* nonfinite) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  const float* strip = op.b + (j0 / (2 * L)) * op.b_strip;
  V acc[kWideRows][2];
  for (size_t r = 0; r < kWideRows; ++r) acc[r][0] = acc[r][1] = hn::Zero(d);
  Fp32Steps(d, op, i0, rows, 0, op.k, strip, acc);
  StoreTile(d, op, i0, rows, j0, 2, [&](size_t r, size_t h) { return hn::Add(hn::Zero(d), acc[r][h]); }, nonfinite);
}

// TileOneBlock of the fused model in float lanes for two strips at once: columns [j0, j0 + 4 vectors).
HWY_NOINLINE void FusedTileTwoStrips(const FastOperands& op, size_t i0, size_t rows, size_t j0, bool* nonfinite) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const FusedPlan& plan = (op.k == op.kblock || !op.fused.plan_tail) ? *op.fused.plan_full : *op.fused.plan_tail;
  HWY_ALIGN float res[kRows * 4 * HWY_MAX_BYTES / sizeof(float)];
  FusedTileBlock<kRows, 2>(d, op, i0, rows, j0, 0, plan, res);
  StoreTile(
      d, op, i0, rows, j0, 4, [&](size_t r, size_t h) { return hn::Add(hn::Zero(d), hn::Load(d, res + (r * 4 + h) * L)); },
      nonfinite);
}
#endif

// One tile: rows [i0, i0+rows) x columns [j0, j0 + 2 vectors). Each block's inner sums are scaled
// and added into the outer sums: in registers (kRows x 2 more vectors; AVX-512 holds them with the
// inner ones), or, when swamping is counted, in outer_buf.
template <bool kCount, FastInner kInner>
HWY_NOINLINE void Tile(const FastOperands& op, size_t i0, size_t rows, size_t j0, float* outer_buf, uint64_t* inner_sw,
                       uint64_t* outer_sw, bool* nonfinite) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  const hn::RebindToSigned<decltype(d)> di;
  auto inner_count = hn::Zero(di), outer_count = hn::Zero(di);
  const bool scaled = op.sa || op.sb;
  const float* strip = op.b ? op.b + (j0 / (2 * L)) * op.b_strip : nullptr;  // no float B for the fused model
  if constexpr (!kCount) {
    (void)outer_buf;
    V outer[kRows][2];
    for (size_t r = 0; r < kRows; ++r) outer[r][0] = outer[r][1] = hn::Zero(d);
    for (size_t bi = 0; bi < op.nblocks; ++bi) {
      const size_t k0 = bi * op.kblock, k1 = std::min(op.k, k0 + op.kblock);
      V acc[kRows][2];
      InnerBlock<false, kInner>(d, op, i0, rows, j0, k0, k1, strip, acc, inner_count);
      // Always added, also into a fresh outer sum: fp32(+0 + -0) is +0, as in the reference.
      if (scaled) {
        // s = fp32(sa * sb), then t = fp32(inner * s): two IEEE multiplies, never fused.
        const V sb0 = BlockColScale(d, op, j0, 0, bi), sb1 = BlockColScale(d, op, j0, 1, bi);
        for (size_t r = 0; r < kRows; ++r) {
          const V sa = BlockRowScale(d, op, i0, rows, r, bi);
          outer[r][0] = hn::Add(outer[r][0], hn::Mul(acc[r][0], hn::Mul(sa, sb0)));
          outer[r][1] = hn::Add(outer[r][1], hn::Mul(acc[r][1], hn::Mul(sa, sb1)));
        }
      } else {
        for (size_t r = 0; r < kRows; ++r)
          for (size_t h = 0; h < 2; ++h) outer[r][h] = hn::Add(outer[r][h], acc[r][h]);
      }
    }
    StoreTile(d, op, i0, rows, j0, 2, [&](size_t r, size_t h) { return outer[r][h]; }, nonfinite);
    return;
  }
  for (size_t r = 0; r < kRows * 2 * L; ++r) outer_buf[r] = 0.0f;
  for (size_t bi = 0; bi < op.nblocks; ++bi) {
    const size_t k0 = bi * op.kblock, k1 = std::min(op.k, k0 + op.kblock);
    V acc[kRows][2];
    InnerBlock<kCount, kInner>(d, op, i0, rows, j0, k0, k1, strip, acc, inner_count);
    for (size_t r = 0; r < rows; ++r)
      for (size_t h = 0; h < 2; ++h) {
        float* o = outer_buf + (r * 2 + h) * L;
        V t = acc[r][h];
        if (scaled) t = hn::Mul(t, hn::Mul(BlockRowScale(d, op, i0, rows, r, bi), BlockColScale(d, op, j0, h, bi)));
        const V before = hn::LoadU(d, o);
        const V after = hn::Add(before, t);
        outer_count = CountSwamped(d, before, t, after, outer_count);
        hn::StoreU(after, d, o);
      }
  }
  *inner_sw += static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, inner_count)));
  *outer_sw += static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, outer_count)));
  StoreTile(d, op, i0, rows, j0, 2, [&](size_t r, size_t h) { return hn::LoadU(d, outer_buf + (r * 2 + h) * L); }, nonfinite);
}

template <bool kCount, FastInner kInner>
void TilesOf(FastOperands& op) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  std::vector<float> zero_row;  // (lives through the parallel region below)
  if constexpr (kInner == FastInner::narrow_rne || kInner == FastInner::narrow_rtz) {
    // The range tests the narrow kernel can skip for this call's data.
    const NarrowChecks checks = narrow_checks(*op.narrow.format, *op.narrow.round, op.a_max, op.b_max, op.kblock);
    op.narrow.check_tiny = checks.tiny;
    op.narrow.check_huge = checks.huge;
    zero_row.assign(op.k, 0.0f);
    op.narrow.zero_row = zero_row.data();
  }
  const size_t row_tiles = (op.m + kRows - 1) / kRows;
  // Column panels keep a slice of B in cache while every row tile passes over it.
  size_t panel = std::max<size_t>(2 * L, (size_t{64} * 1024 / sizeof(float) / std::max<size_t>(op.k, 1)) / (2 * L) * (2 * L));
  if constexpr (kInner == FastInner::fused) panel = std::max<size_t>(panel, 4 * L);  // (strips in pairs)
  // Each thread owns a fixed range of row tiles and walks the panels over it (one thread, without
  // entering OpenMP, when the call is too small to repay a team).
  const bool one_block = !kCount && op.nblocks == 1 && !op.sa && !op.sb;
  auto run = [&](size_t threads, size_t t) {
    const size_t rt0 = row_tiles * t / threads, rt1 = row_tiles * (t + 1) / threads;
    HWY_ALIGN float buf[kRows * 2 * HWY_MAX_BYTES / sizeof(float)];
    uint64_t inner_sw = 0, outer_sw = 0;
    bool nonfinite = false;
    for (size_t p0 = 0; p0 < op.npad; p0 += panel) {
      const size_t p1 = std::min(op.npad, p0 + panel);
      for (size_t rt = rt0; rt < rt1; ++rt) {
        const size_t i0 = rt * kRows, rows = std::min(kRows, op.m - i0);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && HWY_NATIVE_FMA
        if constexpr (kInner == FastInner::fp32) {
          // Two row tiles at a time where the thread has them (Fp32TileWide).
          const size_t end = std::min(op.m, rt1 * kRows);
          if (one_block && op.use_fma && end - i0 > kRows) {
            const size_t wide = std::min(kWideRows, end - i0);
            for (size_t j0 = p0; j0 < p1; j0 += 2 * L) Fp32TileWide(op, i0, wide, j0, &nonfinite);
            ++rt;
            continue;
          }
        }
#endif
        for (size_t j0 = p0; j0 < p1; j0 += 2 * L) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
          if constexpr (kInner == FastInner::fused) {
            if (one_block && op.fused.float_lanes && j0 + 4 * L <= p1) {
              FusedTileTwoStrips(op, i0, rows, j0, &nonfinite);
              j0 += 2 * L;
              continue;
            }
          }
#endif
          if (one_block) TileOneBlock<kInner>(op, i0, rows, j0, &nonfinite);
          else Tile<kCount, kInner>(op, i0, rows, j0, buf, &inner_sw, &outer_sw, &nonfinite);
        }
      }
    }
#pragma omp atomic
    op.inner_swamped += inner_sw;
#pragma omp atomic
    op.outer_swamped += outer_sw;
    if (nonfinite) {
#pragma omp atomic write
      op.nonfinite = true;
    }
  };
  if (!op.parallel) {
    run(1, 0);
    return;
  }
#pragma omp parallel
  run(static_cast<size_t>(omp_get_num_threads()), static_cast<size_t>(omp_get_thread_num()));
}

void FastMatmul(FastOperands& op) {
  switch (op.inner) {
    case FastInner::fp32:
      return op.count_swamping ? TilesOf<true, FastInner::fp32>(op) : TilesOf<false, FastInner::fp32>(op);
    case FastInner::narrow_rne:
      return op.count_swamping ? TilesOf<true, FastInner::narrow_rne>(op) : TilesOf<false, FastInner::narrow_rne>(op);
    case FastInner::narrow_rtz:
      return op.count_swamping ? TilesOf<true, FastInner::narrow_rtz>(op) : TilesOf<false, FastInner::narrow_rtz>(op);
    case FastInner::fused:
      return op.count_swamping ? TilesOf<true, FastInner::fused>(op) : TilesOf<false, FastInner::fused>(op);
  }
}

// Lanes of a float vector and the name of the target FastMatmul dispatches to (for tests).
const char* FastTargetName() { return hwy::TargetName(HWY_TARGET); }

bool HasNativeFma() { return HWY_NATIVE_FMA != 0; }
size_t FloatLanes() { return hn::Lanes(hn::ScalableTag<float>()); }
bool FusedFloatLanes() { return kFusedFloatLanes; }  // (the integer route's float lanes)
bool FusedFourInFloat() { return kFusedFourInFloat; }
// (The integer route reads float vectors of twice a double vector's lanes, which the scalar target lacks.)
bool FusedIntCuts() { return HWY_TARGET != HWY_SCALAR; }

// The magnitude range of a rows x cols block of floats (row stride ld) for the packing checks and
// the in-place scan: the smallest non-zero and the largest |v|, whether a NaN or inf is present (the
// range is then not used: the call goes to the reference), and the number of subnormals
// (0 < |v| < 2^-126). Worked on the encodings: |v|'s encoding a = bits & 0x7fffffff orders as |v|
// does (inf above every finite value, NaN above inf), so the largest a is the amax and tells a
// non-finite value; a - 1 wraps zero to the top, so the smallest a - 1 is the smallest non-zero; and
// a - 1 < 2^23 - 1 exactly for the subnormals. Six integer operations a vector, against eleven in
// float (the scan runs over every operand of an fp32 training matmul). The vector state runs
// across rows (rows of an attention head are 32 floats: a reduction per row would cost more than
// the row).
void FloatMagnitudeRange(const float* v, size_t rows, size_t cols, size_t ld, FloatScan* out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::RebindToSigned<decltype(d)> di;
  using VU = hn::Vec<decltype(du)>;
  const size_t L = hn::Lanes(d);
  constexpr uint32_t kAbs = 0x7fffffffu, kSubLimit = 0x007fffffu, kInfBits = 0x7f800000u;
  const VU abs_mask = hn::Set(du, kAbs), one = hn::Set(du, 1u), sub_limit = hn::Set(du, kSubLimit);
  // Two sets of accumulators for every other vector: two independent dependency chains, so the
  // loop runs at load speed instead of at the latency of Max/Min (the results combine exactly).
  VU vmax = hn::Zero(du), vmax2 = vmax, vmin1 = hn::Set(du, 0xffffffffu), vmin1_2 = vmin1;
  auto subs = hn::Zero(di), subs2 = subs;  // per-lane counts, moved to `sub` before they could reach 2^31
  size_t lane_adds = 0;
  uint32_t mx = 0, mn1 = 0xffffffffu;
  uint64_t sub = 0;
  auto note = [&](const float* p, VU& max_acc, VU& min1_acc, decltype(subs)& subs_acc) {
    const VU a = hn::And(hn::BitCast(du, hn::LoadU(d, p)), abs_mask);
    max_acc = hn::Max(max_acc, a);
    const VU a1 = hn::Sub(a, one);
    min1_acc = hn::Min(min1_acc, a1);
    subs_acc = hn::Sub(subs_acc, hn::BitCast(di, hn::VecFromMask(du, hn::Gt(sub_limit, a1))));
  };
  for (size_t r = 0; r < rows; ++r) {
    const float* row = v + r * ld;
    size_t i = 0;
    for (; i + 2 * L <= cols; i += 2 * L) {
      note(row + i, vmax, vmin1, subs);
      note(row + i + L, vmax2, vmin1_2, subs2);
    }
    for (; i + L <= cols; i += L) note(row + i, vmax, vmin1, subs);
    for (; i < cols; ++i) {
      uint32_t a;
      std::memcpy(&a, row + i, sizeof a);
      a &= kAbs;
      mx = a > mx ? a : mx;
      mn1 = a - 1 < mn1 ? a - 1 : mn1;
      sub += a - 1 < kSubLimit;
    }
    lane_adds += cols / L;
    if (lane_adds >= (size_t{1} << 30)) {
      sub += static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, hn::Add(subs, subs2))));
      subs = subs2 = hn::Zero(di);
      lane_adds = 0;
    }
  }
  vmax = hn::Max(vmax, vmax2);
  vmin1 = hn::Min(vmin1, vmin1_2);
  subs = hn::Add(subs, subs2);
  HWY_ALIGN uint32_t lanes_max[64], lanes_min1[64];  // 64 lanes: the widest vector Highway has
  hn::Store(vmax, du, lanes_max);
  hn::Store(vmin1, du, lanes_min1);
  for (size_t l = 0; l < L; ++l) {
    mx = std::max(mx, lanes_max[l]);
    mn1 = std::min(mn1, lanes_min1[l]);
  }
  sub += static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, subs)));
  auto float_of = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  out->min_nonzero = mn1 == 0xffffffffu ? INFINITY : float_of(mn1 + 1);
  out->max = float_of(mx);
  out->nonfinite = mx >= kInfBits;
  out->subnormal = sub;
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {
HWY_EXPORT(FastMatmul);
HWY_EXPORT(HasNativeFma);
HWY_EXPORT(FloatLanes);
HWY_EXPORT(FusedFloatLanes);
HWY_EXPORT(FusedFourInFloat);
HWY_EXPORT(FusedIntCuts);
HWY_EXPORT(FusedExpCodes);
HWY_EXPORT(FusedPackStrips);
HWY_EXPORT(FloatMagnitudeRange);
HWY_EXPORT(FastTargetName);

namespace {

// A narrow accumulator the TwoSum / round-to-odd kernel computes exactly: at least two bits fewer
// than fp32 (round to odd at 24 bits, then to the format, is one correct rounding), its normal
// range inside fp32's (so the constant-shift rounding holds there), a signed zero (as fp32's), and
// a deterministic mode whose zero sums have fp32's sign (rne, rtz).
bool is_narrow_kernel_accumulator(const Accumulator& acc) {
  const Format& f = acc.format;
  return f.kind == Kind::floating && f.man_bits <= 21 && f.emin >= -126 && f.emax <= 127 && f.has_neg_zero &&
         (acc.round.mode == Rounding::rne || acc.round.mode == Rounding::rtz) &&
         (acc.order == SumOrder::sequential || acc.order == SumOrder::reverse) && !acc.fused;
}

// An outer accumulator whose sum of one block term is a single rounded add +0 + t (every order but
// split and splitk, which add their empty partial sums too), without random bits.
bool is_single_add_outer(const Accumulator& acc) {
  return !order_has_parts(acc.order) && acc.round.mode != Rounding::sr && !acc.fused;
}

// Range of the non-zero magnitudes of v (finite values only; the caller checks finiteness).
struct MagnitudeRange {
  double min_nonzero = INFINITY, max = 0;
  bool finite = true;
};

// One value into a running magnitude range (branch-free, so that the packing loops vectorise).
inline void note_magnitude(double x, double& min_nonzero, double& max, int& bad) {
  const double a = std::fabs(x);
  bad |= !(a <= 0x1.fffffffffffffp1023);  // inf or NaN
  max = a > max ? a : max;
  const double nz = a == 0 ? INFINITY : a;
  min_nonzero = nz < min_nonzero ? nz : min_nonzero;
}

MagnitudeRange magnitude_range(const std::vector<double>& v) {
  MagnitudeRange r;
  for (double x : v) {
    const double a = abs_of(x);
    if (!(a < INFINITY)) r.finite = false;  // inf or NaN
    else if (a != 0) {
      r.min_nonzero = std::min(r.min_nonzero, a);
      r.max = std::max(r.max, a);
    }
  }
  return r;
}

// Every product x*y of values of formats fa, fb inside these ranges is exact in fp32: at most 24
// significant bits, below 2^128, and its last bit at or above 2^-149 (a value x >= min of format f
// has its last bit at or above 2^(e(min) - man_bits)).
bool products_exact_in_float(const Format& fa, const MagnitudeRange& ra, const Format& fb, const MagnitudeRange& rb) {
  if (significand_bits(fa) + significand_bits(fb) > 24) return false;
  if (ra.max == 0 || rb.max == 0) return true;  // all products zero
  if (ra.max * rb.max >= 0x1p128) return false;
  const int man_a = fa.kind == Kind::floating ? fa.man_bits : 0, man_b = fb.kind == Kind::floating ? fb.man_bits : 0;
  return std::ilogb(ra.min_nonzero) - man_a + std::ilogb(rb.min_nonzero) - man_b >= -149;
}

// A bound on a group's sum in units of its last kept bit: terms+1 cut terms (c among them), each
// below 2^(kept_bits+2). A lane type adds the group exactly where this is at most 2^(p-2)..2^p, p
// its significand bits (the routes below say which).
double fused_cut_sum_bound(const FusedModel& m) {
  return (static_cast<double>(m.terms) + 1) * std::ldexp(1.0, m.kept_bits + 2);
}

}  // namespace

bool fused_groups_exact_in_double(const FusedModel& m) {
  if (!m.align_includes_acc || m.sticky || !m.in_subnormals || fused_model_invalid(m)) return false;
  if (m.final_rounding != Rounding::rne && m.final_rounding != Rounding::rtz) return false;
  if (!fits_float(m.out) || m.out_man_bits > 23 || m.out.emin < -126) return false;
  return fused_cut_sum_bound(m) <= 0x1p53;
}

bool fused_sums_exact(const FusedModel& m, const Format& fa, const Format& fb, size_t n) {
  auto plain_values = [](const Format& f) {
    return (f.kind == Kind::floating || f.kind == Kind::integer) && !f.inf && f.nan == NanCode::none &&
           f.max_finite > 0;
  };
  if (n == 0 || m.interleave != 0 || !m.in_subnormals || fused_model_invalid(m)) return false;
  if (!plain_values(fa) || !plain_values(fb)) return false;
  const int g = last_bit_exp(fa, fa.min_positive) + last_bit_exp(fb, fb.min_positive);  // log2 of the grid
  // P / g: an integer (the largest values are multiples of their grids), and n times it, in integers.
  const double ratio = std::ldexp(fa.max_finite * fb.max_finite, -g);
  if (!(ratio <= 0x1p24) || n > (uint64_t{1} << 32)) return false;
  const uint64_t span = static_cast<uint64_t>(n) * static_cast<uint64_t>(ratio);  // n * P / g
  const int span_exp = top_bit(span);  // n * P < 2^(span_exp + 1 + g)
  auto code = [&](const Format& f) { return std::max(std::ilogb(f.max_finite), m.in_emin); };
  const int e_max = std::max({code(fa) + code(fb), std::max(span_exp + g, m.out.emin), m.min_align_exp});
  if (e_max - m.kept_bits > g) return false;  // the cut would drop bits of some term
  if (span >= (uint64_t{1} << (m.out_man_bits + 1)) || span_exp + g + 1 > m.out.emax + 1) return false;
  if (g < (m.out_subnormals ? m.out.emin - m.out_man_bits : m.out.emin)) return false;
  return span <= (uint64_t{1} << 24) && g >= -149 && span_exp + g + 1 <= 128;  // and the fp32 sum's partial sums
}

namespace {

int half_of(fused_detail::Consecutive) { return -1; }
int half_of(fused_detail::Interleaved pos) { return pos.h; }

// The groups of fused_dot over a block of `len` products, as fused_dot_strided and
// fused_chain_strided (for_each_chain_group) form them.
FusedPlan build_fused_plan(size_t len, const FusedModel& m) {
  FusedPlan plan;
  auto add_chain = [&](uint32_t s, uint32_t seg) {
    for_each_chain_group(static_cast<int>(seg), m, [&](int g0, int n, auto pos) {
      FusedGroup g;
      g.first = static_cast<uint32_t>(plan.index.size());
      g.n = static_cast<uint32_t>(n);
      g.start = s + static_cast<uint32_t>(g0);
      g.half = half_of(pos);
      for (int i = 0; i < n; ++i) plan.index.push_back(g.start + static_cast<uint32_t>(pos(i)));
      plan.groups.push_back(g);
    });
    plan.chain_end.push_back(static_cast<uint32_t>(plan.groups.size()));
  };
  const uint32_t n = static_cast<uint32_t>(len);
  if (m.promote_every > 0) {
    const uint32_t step = static_cast<uint32_t>(m.promote_every);
    for (uint32_t s = 0; s < n; s += step) add_chain(s, std::min(step, n - s));
  } else {
    add_chain(0, n);
  }
  return plan;
}

}  // namespace

FloatScan scan_floats(const float* v, size_t rows, size_t cols, size_t ld) {
  FloatScan r;
  HWY_DYNAMIC_DISPATCH(FloatMagnitudeRange)(v, rows, cols, ld, &r);
  return r;
}

const char* matmul_fast_target_name() { return HWY_DYNAMIC_DISPATCH(FastTargetName)(); }
std::vector<int64_t> matmul_fast_targets() { return hwy::SupportedAndGeneratedTargets(); }

namespace {

// The magnitude range of len values (double or float) into a running range: SIMD for floats
// (in fixed pieces over threads when it is worth it), note_magnitude for doubles.
void magnitude_of(const float* v, size_t len, double& min_out, double& max_out, int& bad_out) {
  constexpr size_t kPiece = size_t{1} << 14;
  const size_t pieces = (len + kPiece - 1) / kPiece;
  float mn = INFINITY, mx = 0;
  int bad = 0;
  auto piece = [&](size_t p, float& lo, float& hi, int& nonfinite) {
    FloatScan r;
    HWY_DYNAMIC_DISPATCH(FloatMagnitudeRange)(v + p * kPiece, 1, std::min(kPiece, len - p * kPiece), 0, &r);
    lo = std::min(lo, static_cast<float>(r.min_nonzero));
    hi = std::max(hi, static_cast<float>(r.max));
    nonfinite |= r.nonfinite;
  };
  if (worth_threads_elements(len)) {
#pragma omp parallel for schedule(static) reduction(min : mn) reduction(max : mx) reduction(| : bad)
    for (size_t p = 0; p < pieces; ++p) piece(p, mn, mx, bad);
  } else {
    for (size_t p = 0; p < pieces; ++p) piece(p, mn, mx, bad);  // (kept out of OpenMP: see arith/parallel.h)
  }
  min_out = std::min(min_out, static_cast<double>(mn));
  max_out = std::max(max_out, static_cast<double>(mx));
  bad_out |= bad;
}

void magnitude_of(const double* v, size_t len, double& min_out, double& max_out, int& bad_out) {
  double mn = INFINITY, mx = 0;
  int bad = 0;
  if (worth_threads_elements(len)) {
#pragma omp parallel for schedule(static) reduction(min : mn) reduction(max : mx) reduction(| : bad)
    for (size_t i = 0; i < len; ++i) note_magnitude(v[i], mn, mx, bad);
  } else {
    for (size_t i = 0; i < len; ++i) note_magnitude(v[i], mn, mx, bad);
  }
  min_out = std::min(min_out, mn);
  max_out = std::max(max_out, mx);
  bad_out |= bad;
}

// One whole row of a strip (W floats: 8, 16 or 32 by the SIMD target) as a copy of fixed size,
// which the compiler inlines: a call to memmove per 128-byte row had taken 4.7% of the attention
// model's fp32 step (its linear layers' input gradients pack the weight, K rows of it, each call).
inline void copy_strip_row(float* dst, const float* src, size_t W) {
  switch (W) {
    case 32: std::memcpy(dst, src, 32 * sizeof(float)); return;
    case 16: std::memcpy(dst, src, 16 * sizeof(float)); return;
    case 8: std::memcpy(dst, src, 8 * sizeof(float)); return;
    default: std::memcpy(dst, src, W * sizeof(float));
  }
}

// B's canonical N x K values (element (j, t) at bq[j*rs + t*cs], double or float) into strips of W
// columns, each K x W contiguous floats; the padding columns are zero. B stored K x N (cs == n's
// stride, rs == 1) copies row pieces; stored N x K it is transposed in chunks.
template <typename Q>
void pack_strips(const Q* bq, size_t rs, size_t cs, size_t n, size_t k, size_t W, float* b) {
  constexpr size_t kT = 64;  // k-rows per transposition chunk: the chunk of a strip stays in L1
  const size_t strips = (n + W - 1) / W;
  for_each_index(strips, worth_threads_elements(n * k), [&](size_t st) {
    float* dst = b + st * k * W;
    const size_t j0 = st * W, j1 = std::min(n, j0 + W);
    if (rs == 1) {
      for (size_t t = 0; t < k; ++t) {
        const Q* src = bq + t * cs + j0;
        float* row = dst + t * W;
        if constexpr (std::is_same_v<Q, float>) {
          if (j1 - j0 == W) {
            copy_strip_row(row, src, W);
            continue;
          }
          std::memcpy(row, src, (j1 - j0) * sizeof(float));
        } else {
          for (size_t j = 0; j < j1 - j0; ++j) row[j] = static_cast<float>(src[j]);
        }
        for (size_t j = j1 - j0; j < W; ++j) row[j] = 0.0f;
      }
      return;
    }
    if constexpr (std::is_same_v<Q, float>) {
      if (cs == 1) {
        transpose_floats(bq + j0 * rs, j1 - j0, k, rs, dst, W, false);
        for (size_t t = 0; t < k; ++t)
          for (size_t j = j1; j < j0 + W; ++j) dst[t * W + (j - j0)] = 0.0f;
        return;
      }
    }
    for (size_t t0 = 0; t0 < k; t0 += kT) {
      const size_t t1 = std::min(k, t0 + kT);
      for (size_t j = j0; j < j1; ++j) {
        const Q* src = bq + j * rs;
        for (size_t t = t0; t < t1; ++t) dst[t * W + (j - j0)] = static_cast<float>(src[t * cs]);
      }
      for (size_t j = j1; j < j0 + W; ++j)
        for (size_t t = t0; t < t1; ++t) dst[t * W + (j - j0)] = 0.0f;
    }
  });
}

// A canonical rows x k float operand stored the other way round (element (r, t) at p[t*cs], rs == 1)
// into k-contiguous rows.
void gather_rows(const float* p, size_t rows, size_t k, size_t cs, float* dst) {
  transpose_floats(p, k, rows, cs, dst, k, false);
}

// B's canonical values (as pack_strips reads them) into the scratch strips the float kernels read.
template <typename Q>
void b_into_strips(const Q* bq, size_t rs, size_t cs, size_t W, FastOperands& op, FastScratch& s) {
  if (s.b.size() < op.k * op.npad) s.b.resize(op.k * op.npad);
  pack_strips(bq, rs, cs, op.n, op.k, W, s.b.data());
  op.b = s.b.data();
  op.b_row = W;
  op.b_strip = op.k * W;
  op.b_rows_partial = false;
}

// The operands' magnitude ranges, taken while packing (one read of each operand).
struct PackedRanges {
  double a_min = INFINITY, a_max = 0, b_min = INFINITY, b_max = 0;
  int a_bad = 0, b_bad = 0;
};

// What the plan decided beyond `op`: the strip width, whether the outer sum is one scalar add in
// another format, and which kernel family runs.
struct FastPlan {
  size_t W = 0;
  bool outer_scalar = false;
  bool inner_fused = false;
  bool products_fit_float = false;  // the operands' significands fit one float's together
  // The fused model's K-blocks run as its own promotion chains in one block (plan_fast says when).
  bool fused_chains = false;
  // The fp32 kernel's sums by pairs of products (arith/matmul_pairs.h), where that is exact: by the
  // formats, or (pairs_by_ranges) by the operands' ranges, taken while packing.
  bool pairs = false;
  bool pairs_by_ranges = false;
};

// Phase 1, plan: whether the fast path computes exactly what the reference does for this call (false:
// the reference runs), and the kernel's shape and accumulator (op).
bool plan_fast(const PreparedOperands& ops, const InPlaceOperand* ia, const InPlaceOperand* ib,
               const MatmulPolicy& policy, const MatmulContext& ctx, FastOperands& op, FastPlan& plan) {
  // A fused model whose K-block sums provably cut nothing (fused_sums_exact) forms each block's exact
  // sum, as the plain fp32 sequential sum does: such calls take the fp32 kernels (pairs included).
  // Not with the block scales folded into the products (other values), nor where swamping is
  // counted (the reference counts the model's).
  const bool fused_as_fp32 = policy.inner.fused && !policy.inner.scales_in_products && !ctx.count_swamping &&
                             fused_sums_exact(*policy.inner.fused, policy.a.format, policy.b.format, ops.kblock);
  const bool inner_fp32 = is_plain_fp32_sequential(policy.inner) || fused_as_fp32;
  const bool inner_narrow = !inner_fp32 && is_narrow_kernel_accumulator(policy.inner);
  const bool inner_fused =
      !fused_as_fp32 && policy.inner.fused && fused_groups_exact_in_double(*policy.inner.fused);
  const bool outer_fp32 = is_plain_fp32_sequential(policy.outer);
  if (policy.product_format || !(inner_fp32 || inner_narrow || inner_fused)) return false;
  if (!outer_fp32 && !is_single_add_outer(policy.outer)) return false;
  if (!fits_float(policy.a.format) || !fits_float(policy.b.format)) return false;
  const bool exact_in_float = folded_significand_bits(policy.a, policy.inner) +
                                  folded_significand_bits(policy.b, policy.inner) <= 24;
  const bool native_fma = HWY_DYNAMIC_DISPATCH(HasNativeFma)();
  // The fp32 kernel multiplies inside an fma where the target has one (exact for any operands up to
  // fp32), else separately (exact only for narrow products inside fp32's range, checked below); the
  // narrow kernel always multiplies separately.
  const bool use_fma = inner_fp32 && native_fma;
  if (!use_fma && !exact_in_float && !inner_fused) return false;  // (the fused kernel multiplies in double)
  if (inner_fused && (ia || ib)) return false;  // the fused kernel reads doubles from ops
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  const size_t m = A.rows, n = B.rows, k = A.k;
  op.m = m;
  op.n = n;
  op.k = k;
  if (m == 0 || n == 0) return true;  // (nothing to compute: the caller returns at once)
  if (!magnitude_range(A.block_scale).finite || !magnitude_range(B.block_scale).finite) return false;
  const size_t nblocks = k == 0 ? 0 : (k + ops.kblock - 1) / ops.kblock;
  // Another outer format: only one unscaled block, whose outer sum is one scalar add (finish_output).
  plan.outer_scalar = !outer_fp32;
  if (plan.outer_scalar && (nblocks > 1 || A.block_k || B.block_k)) return false;
  plan.inner_fused = inner_fused;
  plan.products_fit_float = exact_in_float;
  const size_t L = HWY_DYNAMIC_DISPATCH(FloatLanes)();
  plan.W = 2 * L;  // columns per strip
  op.npad = (n + plan.W - 1) / plan.W * plan.W;
  op.kblock = ops.kblock;
  op.nblocks = nblocks;
  op.outer_terms = nblocks;
  // A fused model's unscaled K-blocks summed by this fp32 outer sum are what the model's own
  // promotion computes (fused_dot_strided: each chain's result joins the running sum by one fp32
  // addition, rne, from +0, as Tile adds each block's inner sum into the outer one). Run as one
  // block whose plan promotes every kblock products, the chains stay in the kernel's lanes and take
  // the two-strip tile (FusedTileTwoStrips) that single blocks take. The telemetry still counts the
  // policy's blocks (outer_terms). Not when the outer adds' swamping is counted, block by block.
  if (inner_fused) {
    const FusedModel& fm = *policy.inner.fused;
    plan.fused_chains = nblocks > 1 && outer_fp32 && !A.block_k && !B.block_k && !ctx.count_swamping &&
                        fm.promote_every == 0 && is_binary32(fm.out) && fm.out_subnormals;
    if (plan.fused_chains) {
      op.kblock = k;
      op.nblocks = 1;
    }
  }
  op.use_fma = use_fma;
  op.count_swamping = ctx.count_swamping;
  op.parallel = worth_threads_products(m * n * k);
  // The pair kernel takes the plain fp32 kernel's calls whose operands are narrow formats' values as
  // they were quantized (not folded with their block scales, not read in place unquantized), in its
  // strips of 32 columns, with K-blocks of whole pairs: FP8/FP6/FP4/int8 by their formats, bf16 by
  // its data's range.
  plan.pairs = inner_fp32 && use_fma && !ctx.count_swamping && !policy.inner.scales_in_products && !ia && !ib &&
               plan.W == 32 && (nblocks == 1 || ops.kblock % 2 == 0) && pair_kernel_available() &&
               pair_formats_fit(policy.a.format, policy.b.format);
  plan.pairs_by_ranges = plan.pairs && !pair_formats_exact(policy.a.format, policy.b.format);
  if (inner_narrow) {
    const Format& f = policy.inner.format;
    op.inner = policy.inner.round.mode == Rounding::rne ? FastInner::narrow_rne : FastInner::narrow_rtz;
    op.narrow.shift = 23 - f.man_bits;
    op.narrow.min_normal_enc = bits_of(static_cast<float>(f.min_normal));
    op.narrow.max_enc = bits_of(static_cast<float>(f.max_finite));
    op.narrow.reverse = policy.inner.order == SumOrder::reverse;
    op.narrow.format = &policy.inner.format;
    op.narrow.round = &policy.inner.round;
  }
  return true;
}

// The integer route (matmul_fused-inl.h) for groups of at most `widest` products, each cut term at
// most 2^(kept_bits+2) - 1 and c's at most 2^(kept_bits+1) - 1 (|c| < 2^(E+1)): the int32
// accumulators it needs, taking the positions in turn, each at most ceil(widest / accs) products
// (1, 2 or 4: B200's 25 kept bits allow 16 products an accumulator, and NVFP4 folded groups 64; 0
// where the route does not fit), and whether c's term added to a group's products could pass int32.
struct IntCutPlan {
  int accs = 0;
  bool sum_may_wrap = false;
};
IntCutPlan int_cut_plan(const FusedModel& m, uint32_t widest) {
  if (m.kept_bits + 2 > 31) return {};
  const int64_t int32_max = (int64_t{1} << 31) - 1;
  const int64_t term = (int64_t{1} << (m.kept_bits + 2)) - 1, c_term = (int64_t{1} << (m.kept_bits + 1)) - 1;
  const int64_t per_acc = int32_max / term;
  IntCutPlan plan;
  for (int accs : {1, 2, 4})
    if ((widest + accs - 1) / accs <= per_acc) {
      plan.accs = accs;
      break;
    }
  plan.sum_may_wrap = int64_t{widest} * term + c_term > int32_max;
  return plan;
}

// The first element of a vector at a cache line (the vector has 64 bytes of room for it), so that
// no vector load of the kernel splits two lines.
template <typename T>
T* line_aligned(std::vector<T>& v, size_t n) {
  if (v.size() < n + 64 / sizeof(T)) v.resize(n + 64 / sizeof(T));
  const size_t off = (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  return v.data() + off / sizeof(T);
}

// The int8 exponent pass and the direct scales of the fused kernel (FusedOperands::ea8,
// code8_shift, direct_scales), decided from the model and the operands' magnitude ranges before B
// is packed. Every code the pass reads must lie in [-30, 30] (kFusedCode8Limit): the formats whose
// codes do (FP8, fp16: in_emin >= -30) with values below 2^31 take it as they are; any other
// operands (bf16, tf32, or larger values) whose non-zero codes each span at most 60 binades take it
// with each operand's codes shifted down to start at -30, where the float lanes take the scales
// straight from the exponent fields (the shifts, a constant per call, go back in there). Training
// tensors span far fewer binades than their format allows (an mlp's gradient from 2^-36 to 2^-12),
// but sit anywhere in fp32's range: without the shifts, their calls took the int16 pass.
struct Code8Plan {
  bool codes8 = false;
  int shift_a = 0, shift_b = 0;  // subtracted from the non-zero codes of A and of B
  bool direct = false;           // FusedOperands::direct_scales, with the two fields below
  bool clamp_c = false;
  int floor = 0;
};

Code8Plan code8_plan(const FusedModel& fm, bool int8_pass, bool float_lanes, double min_align, const PackedRanges& r) {
  Code8Plan plan;
  if (!int8_pass || r.a_bad || r.b_bad) return plan;
  const int in_emin = fm.in_emin;
  int products_lowest = 2 * in_emin;  // the smallest exponent of a non-zero product
  if (in_emin >= -kFusedCode8Limit && r.a_max < 0x1p31 && r.b_max < 0x1p31) {
    plan.codes8 = true;
  } else {
    if (!float_lanes || r.a_max == 0 || r.b_max == 0) return plan;
    // The codes of the smallest and largest non-zero value (exponents clamped at in_emin).
    auto code = [in_emin](double x) { return fused_detail::align_exp(x, in_emin); };
    const int a_lo = code(r.a_min), b_lo = code(r.b_min);
    if (code(r.a_max) - a_lo > 2 * kFusedCode8Limit || code(r.b_max) - b_lo > 2 * kFusedCode8Limit) return plan;
    plan.codes8 = true;
    plan.shift_a = a_lo + kFusedCode8Limit;
    plan.shift_b = b_lo + kFusedCode8Limit;
    products_lowest = a_lo + b_lo;
  }
  if (!float_lanes) return plan;
  // The lowest E of a lane with a non-zero term (FusedOperands::direct_scales, where the reasoning
  // is), raised to min_align.
  const int shift = plan.shift_a + plan.shift_b;
  const int out_lowest = fm.out.emin - (fm.out_subnormals ? fm.out_man_bits : 0);
  const int c_lowest = std::max(products_lowest - fm.kept_bits, out_lowest);  // a non-zero c's exponent
  const int c_floor = std::max(c_lowest, fm.out.emin);                        // clamped as the model does
  const int floor = std::max(std::min(products_lowest, c_floor), static_cast<int>(min_align));
  // (A lane of zero products sums to at most -128 + 30 in the int8 pass, in shifted codes: the
  // floor must reach it there.)
  plan.direct = c_lowest >= -126 && floor - fm.kept_bits >= kIntCutQMin && floor - shift >= -128 + kFusedCode8Limit;
  plan.clamp_c = fm.out.emin > floor;
  plan.floor = floor;
  if (shift != 0 && !plan.direct) return Code8Plan{};  // (shifted codes serve the direct scales only)
  return plan;
}

// Phase 2a, pack for the fused kernel (the layouts of FusedOperands): the route; the alignment codes
// of A and B, A as the lanes read it, B in strips (split by sign for the double lanes); the operands'
// magnitude ranges. Float operands (the float entry) are packed by SIMD (B through one
// transposition), doubles element by element. The plans live in the caller (op points at them).
void pack_fused(const PreparedOperands& ops, const FusedModel& fm, bool products_fit_float, size_t W, FastOperands& op,
                FastScratch& s, FusedPlan& plan_full, FusedPlan& plan_tail, PackedRanges& r) {
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  const size_t m = op.m, n = op.n, k = op.k, npad = op.npad, strips = npad / W;
  plan_full = build_fused_plan(op.kblock, fm);
  if (k % op.kblock != 0) plan_tail = build_fused_plan(k % op.kblock, fm);
  uint32_t widest = 0;
  for (const FusedGroup& g : plan_full.groups) widest = std::max(widest, g.n);
  for (const FusedGroup& g : plan_tail.groups) widest = std::max(widest, g.n);
  // The integer route where the products are exact in float (every preset), else double lanes.
  const IntCutPlan int_plan =
      products_fit_float && HWY_DYNAMIC_DISPATCH(FusedIntCuts)() ? int_cut_plan(fm, widest) : IntCutPlan{};
  const bool int_cuts = int_plan.accs > 0;
  const int in_emin = fm.in_emin;
  // Exponents of the formats the fused path takes (fits_float) and kZeroExp fit int16, and so do
  // the kernel's sums of two of them.
  static_assert(2 * kZeroExp >= std::numeric_limits<int16_t>::min());
  // (NaN and infinity get some code: the ranges then send the call to the reference.)
  auto align_exp = [in_emin](double x) { return static_cast<int16_t>(fused_detail::align_code(x, in_emin)); };
  if (s.ea.size() < m * k) s.ea.resize(m * k);
  if (s.eb.size() < k * npad) s.eb.resize(k * npad);
  int32_t* ea = s.ea.data();
  int16_t* eb = s.eb.data();
  double* bd = int_cuts ? nullptr : line_aligned(s.bd, 2 * k * npad);
  float* bf = int_cuts ? line_aligned(s.b, k * npad) : nullptr;
  FusedOperands& fo = op.fused;
  fo = FusedOperands{};
  fo.min_align = std::max(static_cast<double>(fm.min_align_exp), kFloorExp);
  // (The integer route runs in float lanes where the target converts its sum in the model's rounding
  // direction: AVX-512, and AVX2 but for four accumulators.)
  fo.float_lanes = int_plan.accs > 0 && HWY_DYNAMIC_DISPATCH(FusedFloatLanes)() &&
                   (int_plan.accs < 4 || HWY_DYNAMIC_DISPATCH(FusedFourInFloat)());
  fo.int_accs = int_plan.accs;
  fo.int_sum_may_wrap = int_plan.sum_may_wrap;
  fo.b = bd;
  fo.bf = bf;
  fo.ea = ea;
  fo.eb = eb;

  // A: codes and range; the kernel's copy (floats in place, or doubles).
  if (A.in_float) {
    const float* qf = A.qf.data();
    magnitude_of(qf, m * k, r.a_min, r.a_max, r.a_bad);
    for_each_index(m, worth_threads_elements(m * k),
                   [&](size_t i) { HWY_DYNAMIC_DISPATCH(FusedExpCodes)(qf + i * k, k, in_emin, ea + i * k); });
    fo.aqf = qf;
    if (int_cuts) {
      fo.af = qf;
    } else {
      s.aq_wide.assign(qf, qf + m * k);
      fo.a = s.aq_wide.data();
    }
  } else {
    const double* aq = A.q.data();
    float* af = nullptr;
    if (int_cuts) {
      if (s.a.size() < m * k) s.a.resize(m * k);
      af = s.a.data();
    }
    double a_min = r.a_min, a_max = r.a_max;
    int a_bad = r.a_bad;
#pragma omp parallel for schedule(static) reduction(min : a_min) reduction(max : a_max) reduction(| : a_bad) \
    if (worth_threads_elements(m * k))
    for (size_t i = 0; i < m * k; ++i) {
      const double x = aq[i];
      note_magnitude(x, a_min, a_max, a_bad);
      ea[i] = FusedPairedCode(align_exp(x));
      if (af) af[i] = static_cast<float>(x);  // (exact: the format fits float)
    }
    r.a_min = a_min;
    r.a_max = a_max;
    r.a_bad = a_bad;
    fo.aq = aq;
    fo.a = aq;
    fo.af = af;
  }

  // B: codes, range and strips.
  const bool int8_pass = HWY_DYNAMIC_DISPATCH(FusedFloatLanes)();  // (the int8 exponent pass: the same targets)
  Code8Plan code8;
  if (B.in_float) {
    const float* qf = B.qf.data();
    magnitude_of(qf, n * k, r.b_min, r.b_max, r.b_bad);
    // B transposed (k x npad, the padding columns zero), then the strips by rows of it. B quantized
    // k-major is that already, but for the padding.
    if (s.bt.size() < k * npad) s.bt.resize(k * npad);
    float* bt = s.bt.data();
    if (B.k_major) {
      for (size_t t = 0; t < k; ++t) std::copy(qf + t * n, qf + (t + 1) * n, bt + t * npad);
    } else {
      transpose_floats(qf, n, k, k, bt, npad, false);
    }
    for (size_t t = 0; t < k; ++t) std::fill(bt + t * npad + n, bt + (t + 1) * npad, 0.0f);
    code8 = code8_plan(fm, int8_pass, fo.float_lanes, fo.min_align, r);
    const size_t threads = worth_threads_elements(n * k) ? static_cast<size_t>(omp_get_max_threads()) : 1;
    for_each_index(threads, threads > 1, [&](size_t part) {
      HWY_DYNAMIC_DISPATCH(FusedPackStrips)(bt, npad, k, strips * part / threads, strips * (part + 1) / threads,
                                            in_emin, code8.codes8, code8.shift_b, bf, bd, eb);
    });
    fo.bqf = qf;
    fo.bqf_k_major = B.k_major;
  } else {
    const double* bq = B.q.data();
    constexpr size_t kT = 64;  // k-rows per transposition chunk: the chunk of a strip stays in L1
    double b_min = r.b_min, b_max = r.b_max;
    int b_bad = r.b_bad;
#pragma omp parallel for schedule(static) reduction(min : b_min) reduction(max : b_max) reduction(| : b_bad) \
    if (worth_threads_elements(n * k))
    for (size_t st = 0; st < strips; ++st) {
      const size_t j0 = st * W;
      for (size_t t0 = 0; t0 < k; t0 += kT) {
        const size_t t1 = std::min(k, t0 + kT);
        for (size_t jj = 0; jj < W; ++jj) {
          const size_t j = j0 + jj;
          const double* src = j < n ? bq + j * k : nullptr;
          for (size_t t = t0; t < t1; ++t) {
            const double y = src ? src[t] : 0.0;
            note_magnitude(y, b_min, b_max, b_bad);
            const size_t at = st * k * 2 * W + t * 2 * W + jj;
            if (int_cuts) {
              bf[st * k * W + t * W + jj] = static_cast<float>(y);  // (exact: the format fits float)
            } else {
              bd[at] = y > 0 ? y : 0.0;
              bd[at + W] = y < 0 ? y : 0.0;
            }
            eb[st * k * W + t * W + jj] = align_exp(y);
          }
        }
      }
    }
    r.b_min = b_min;
    r.b_max = b_max;
    r.b_bad = b_bad;
    fo.bq = bq;
  }
  op.inner = FastInner::fused;
  fo.model = &fm;
  fo.plan_full = &plan_full;
  fo.plan_tail = k % op.kblock != 0 ? &plan_tail : nullptr;
  op.fused.lean_floors = fm.out.emin - fm.kept_bits < kIntCutQMin && op.fused.min_align - fm.kept_bits < kIntCutQMin;
  op.fused.narrow_terms = op.fused.lean_floors && fm.out.emin <= -126 && 2 * fm.in_emin - fm.kept_bits >= -126;
  if (code8.codes8) {
    // A's narrow codes per row pair (a missing second row repeats the first), shifted as the plan
    // says (a zero's code stays below -128 after it: kZeroExp).
    const size_t pairs = (m + 1) / 2;
    if (s.ea8.size() < pairs * k) s.ea8.resize(pairs * k);
    int32_t* ea8 = s.ea8.data();
    const int shift_a = code8.shift_a;
    for_each_index(pairs, worth_threads_elements(m * k), [&](size_t P) {
      const int32_t* c0 = ea + 2 * P * k;
      const int32_t* c1 = 2 * P + 1 < m ? c0 + k : c0;
      for (size_t t = 0; t < k; ++t) {
        const uint16_t pair = static_cast<uint16_t>(FusedPairedCode8(FusedCode8(static_cast<int16_t>(c0[t]) - shift_a),
                                                                     FusedCode8(static_cast<int16_t>(c1[t]) - shift_a)));
        ea8[P * k + t] = static_cast<int32_t>(pair | (static_cast<uint32_t>(pair) << 16));
      }
    });
    fo.ea8 = ea8;
    fo.code8_shift = code8.shift_a + code8.shift_b;
    fo.direct_scales = code8.direct;
    fo.direct_clamp_c = code8.clamp_c;
    fo.direct_floor = code8.floor;
  }
}

// Phase 2b, pack for the float kernels. A (M x K) is the kernel's layout already: float values are
// read in place, doubles converted; the operands' magnitude ranges are taken on the way (an in-place
// operand comes with its range). B (N x K) into strips of W columns, each K x W contiguous; the
// padding columns are zero. Without `ranges` (kernel_reads_ranges) the float operands are not
// scanned.
void pack_floats(const PreparedOperands& ops, const InPlaceOperand* ia, const InPlaceOperand* ib, size_t W,
                 bool ranges, bool pairs, FastOperands& op, FastScratch& s, PackedRanges& r) {
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  const size_t m = op.m, n = op.n, k = op.k;
  op.lda = k;
  op.a_col = 1;
  // A stored K x M (k-major) is read where it lies by the fp32 kernel, which steps A by op.a_col (a
  // tile's rows then lie side by side in one row of A); the other kernels take it as rows.
  const bool a_by_columns = op.inner == FastInner::fp32;
  auto k_major_a = [&](const float* p, size_t ld) {
    if (a_by_columns) {
      op.a = p;
      op.lda = 1;
      op.a_col = ld;
      return;
    }
    if (s.a.size() < m * k) s.a.resize(m * k);
    gather_rows(p, m, k, ld, s.a.data());
    op.a = s.a.data();
  };
  if (ia) {
    r.a_min = ia->min_nonzero;
    r.a_max = ia->max;
    if (ia->cs == 1) {
      op.a = ia->p;
      op.lda = ia->rs;
    } else {
      k_major_a(ia->p, ia->cs);  // (an in-place operand has rs or cs 1)
    }
  } else if (A.in_float && A.k_major) {
    if (ranges) magnitude_of(A.qf.data(), m * k, r.a_min, r.a_max, r.a_bad);
    k_major_a(A.qf.data(), m);
  } else if (A.in_float) {
    if (ranges) magnitude_of(A.qf.data(), m * k, r.a_min, r.a_max, r.a_bad);
    op.a = A.qf.data();
  } else {
    if (s.a.size() < m * k) s.a.resize(m * k);
    float* a = s.a.data();
    const double* aq = A.q.data();
    double a_min = r.a_min, a_max = r.a_max;
    int a_bad = r.a_bad;
    auto element = [&](size_t i, double& lo, double& hi, int& nonfinite) {
      note_magnitude(aq[i], lo, hi, nonfinite);
      a[i] = static_cast<float>(aq[i]);
    };
    if (worth_threads_elements(m * k)) {
#pragma omp parallel for schedule(static) reduction(min : a_min) reduction(max : a_max) reduction(| : a_bad)
      for (size_t i = 0; i < m * k; ++i) element(i, a_min, a_max, a_bad);
    } else {
      for (size_t i = 0; i < m * k; ++i) element(i, a_min, a_max, a_bad);
    }
    r.a_min = a_min;
    r.a_max = a_max;
    r.a_bad = a_bad;
    op.a = a;
  }
  // B read where it lies: floats stored K x N whose columns fill whole strips are already the
  // strips' rows, one row of B from the next (the fp32 kernel steps B by op.b_row; the narrow
  // kernels read packed strips only). The copy into strips reads and writes all of B once more,
  // which a call of few rows does not repay: `drift bench gemm`, 1 thread, M = 64, N = K = 512:
  // fp32 0.97 -> 1.12 of sgemm, mxfp8 0.66 -> 0.72. A strip read in place is a row piece every
  // ldb floats, which many row tiles passing over it read back from L2 (power-of-two strides
  // crowd a few cache sets): at M = 1024 the copy into strips paid (mxfp8 0.74 against 0.72).
  constexpr size_t kInPlaceBMaxRows = 96;
  const bool whole_strips = op.inner == FastInner::fp32 && n % W == 0 && m <= kInPlaceBMaxRows;
  if (ib && whole_strips && ib->rs == 1) {
    r.b_min = ib->min_nonzero;
    r.b_max = ib->max;
    op.b = ib->p;
    op.b_row = ib->cs;
    op.b_strip = W;
    return;
  }
  // The pair kernel reads a K x N float B where it lies too, whatever its shape: it makes its own
  // strips of pairs from the rows, padding the last (b_rows_partial until then: the float kernels
  // get strips, b_into_strips, if the pair kernel does not run).
  if (!ib && B.in_float && B.k_major && (whole_strips || pairs)) {
    if (ranges) magnitude_of(B.qf.data(), n * k, r.b_min, r.b_max, r.b_bad);
    op.b = B.qf.data();
    op.b_row = n;
    op.b_strip = W;
    op.b_rows_partial = n % W != 0;
    return;
  }
  // B's values (contiguous, double or float) into strips, their range first where it is asked for
  // (a contiguous pass of its own, which vectorises where the transposing copy cannot).
  auto pack_b = [&](const auto* q, size_t rs, size_t cs) {
    if (ranges) magnitude_of(q, n * k, r.b_min, r.b_max, r.b_bad);
    b_into_strips(q, rs, cs, W, op, s);
  };
  if (ib) {
    r.b_min = ib->min_nonzero;
    r.b_max = ib->max;
    b_into_strips(ib->p, ib->rs, ib->cs, W, op, s);
  } else if (B.in_float && B.k_major) {
    pack_b(B.qf.data(), 1, n);  // (K x N: the strips are pieces of its rows)
  } else if (B.in_float) {
    pack_b(B.qf.data(), k, 1);
  } else {
    pack_b(B.q.data(), k, 1);
  }
}

// Whether the kernel asks the operands' magnitude ranges more than whether they are finite:
// ranges_allow_fast's product checks (the counting kernel's, a separate multiply's), and the
// narrow and fused kernels' range tests. The plain fp32 kernel with fma does not: a NaN or inf
// operand gives a non-finite result, which sends the call to the reference all the same.
bool kernel_reads_ranges(const FastOperands& op) {
  return !(op.inner == FastInner::fp32 && op.use_fma && !op.count_swamping);
}

// Whether the packed operands' ranges keep the kernel exact: any NaN/inf goes to the reference
// (overflow rules live there), as do products the kernel could not compute exactly.
bool ranges_allow_fast(const PackedRanges& r, const MatmulPolicy& policy, const MatmulContext& ctx, bool inner_fused,
                       FastOperands& op) {
  const MagnitudeRange ra{r.a_min, r.a_max, r.a_bad == 0}, rb{r.b_min, r.b_max, r.b_bad == 0};
  if (!ra.finite || !rb.finite) return false;
  // Block scales folded into the elements (inner.scales "products") can take them out of float's
  // range, where the kernel's float copies would not be exact; values below float's smallest normal
  // (only MX scales near 2^-127 make them) are left to the reference too, rather than argued for.
  if (policy.inner.scales_in_products)
    for (const MagnitudeRange* x : {&ra, &rb})
      if (x->max > 0 && (x->min_nonzero < 0x1p-126 || x->max >= 0x1p128)) return false;
  op.a_max = r.a_max;
  op.b_max = r.b_max;
  if (op.use_fma) {
    // The counting kernel tells a product's exactness from an fma residual, which is exact only
    // while the product stays above 2^-100 (no underflow); tinier products go to the reference.
    if (ctx.count_swamping && ra.max > 0 && rb.max > 0 && ra.min_nonzero * rb.min_nonzero < 0x1p-100) return false;
  } else if (!inner_fused && !products_exact_in_float(policy.a.format, ra, policy.b.format, rb)) {
    return false;  // a separate fp32 multiply would round (or leave fp32's range)
  }
  return true;
}

// Phase 3, scale: the block scales in float (every scale kind yields fp32-representable scales:
// e8m0, e4m3, fp32) and alpha, the product of the tensor scales in the outer format.
double scale_blocks(const PreparedOperands& ops, const MatmulPolicy& policy, bool outer_scalar, FastOperands& op,
                    FastScratch& s) {
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  // Kernel block bi of a row reads the operand's block (bi * kblock) / block_k of it, through this
  // table; null when their sizes agree and it is block bi (MX: one division per block was most of
  // this phase's time, then the table's indirection, which kept A's row copy from vectorising; B's
  // copy is a transpose, strided either way).
  auto block_of = [&](const QuantizedOperand& Q, std::vector<size_t>& at) -> const size_t* {
    if (Q.block_k == ops.kblock) return nullptr;
    at.resize(op.nblocks);
    for (size_t bi = 0; bi < op.nblocks; ++bi) at[bi] = (bi * ops.kblock) / Q.block_k;
    return at.data();
  };
  std::vector<size_t> at;
  if (A.block_k) {
    s.sa.resize(op.m * op.nblocks);
    const size_t* blk = block_of(A, at);
    for (size_t i = 0; i < op.m; ++i) {
      const double* row = A.block_scale.data() + i * A.blocks_per_row;
      float* sa = s.sa.data() + i * op.nblocks;
      if (!blk)
        for (size_t bi = 0; bi < op.nblocks; ++bi) sa[bi] = static_cast<float>(row[bi]);
      else
        for (size_t bi = 0; bi < op.nblocks; ++bi) sa[bi] = static_cast<float>(row[blk[bi]]);
    }
    op.sa = s.sa.data();
  }
  if (B.block_k) {
    s.sb.assign(op.nblocks * op.npad, 1.0f);  // (reused storage: no fresh pages)
    const size_t* blk = block_of(B, at);
    for (size_t j = 0; j < op.n; ++j) {
      const double* row = B.block_scale.data() + j * B.blocks_per_row;
      for (size_t bi = 0; bi < op.nblocks; ++bi) s.sb[bi * op.npad + j] = static_cast<float>(row[blk ? blk[bi] : bi]);
    }
    op.sb = s.sb.data();
  }
  const double alpha = A.tensor_scale * B.tensor_scale == 1.0
                           ? 1.0
                           : op_mul(A.tensor_scale, B.tensor_scale, policy.outer.format, policy.outer.round);
  op.alpha = outer_scalar ? 1.0f : static_cast<float>(alpha);
  return alpha;
}

// Phase 4, finish: each result through the outer sum of a scalar outer format and alpha (as the
// reference), then the output rounding into C, and the call's telemetry. `direct`: the kernel wrote
// C itself (nothing left to do per element).
template <typename CT>
void finish_output(const FastOperands& op, const MatmulPolicy& policy, const MatmulContext& ctx, bool outer_scalar,
                   bool out_is_identity, bool direct, double alpha, CT* c, size_t ldc, MatmulTelemetry& tel) {
  const size_t m = op.m, n = op.n;
  const bool out_sr = policy.out_round.mode == Rounding::sr;
  uint64_t outer_scalar_swamped = 0;
  const float* cbuf = op.c;
  const size_t out_rows = direct ? 0 : m;  // (direct: C is finished)
  // The output rounding alone (no scalar outer sum) into a format whose values are floats: the SIMD
  // span cast of each row, with round_to's bits and random words (element i*n + j of the output
  // stream). The rows are the scratch C, cast in place where C is double.
  const bool span_cast = !direct && !outer_scalar && !out_is_identity && fits_float(policy.out_format) &&
                         policy.out_round.sr_bits >= 0 && policy.out_round.sr_bits <= 32;
  const SpanCast out_cast = span_cast ? prepare_span_cast(policy.out_format, policy.out_round) : SpanCast{};
  const uint64_t out_stream = ctx.stream ^ (kMatmulStreamOut << 56);
  auto finish_row = [&](size_t i, uint64_t& swamped) {
    if (span_cast) {
      float* row = op.c + i * n;
      if constexpr (std::is_same_v<CT, float>) {
        cast_span(out_cast, row, c + i * ldc, n, ctx.seed, out_stream, i * n);
      } else {
        cast_span(out_cast, row, row, n, ctx.seed, out_stream, i * n);
        for (size_t j = 0; j < n; ++j) c[i * ldc + j] = row[j];
      }
      return;
    }
    RandomWords words(ctx.seed, out_stream);
    for (size_t j = 0; j < n; ++j) {
      double y = cbuf[i * n + j];
      if (outer_scalar) {
        // The outer sum of the one block, +0 + t, and alpha, in the outer format (as the reference).
        if (op.nblocks == 1) {
          const double t = y;
          y = op_add(0.0, t, policy.outer.format, policy.outer.round);
          if (t != 0 && y == 0) ++swamped;
        } else {
          y = 0.0;
        }
        if (alpha != 1.0) y = op_mul(y, alpha, policy.outer.format, policy.outer.round);
      }
      const uint32_t rnd = out_sr ? words.at(i * n + j) : 0;
      c[i * ldc + j] = static_cast<CT>(out_is_identity && !outer_scalar
                                           ? y
                                           : round_to(y, policy.out_format, policy.out_round, rnd));
    }
  };
  if (worth_threads_elements(out_rows * n)) {
#pragma omp parallel for schedule(static) reduction(+ : outer_scalar_swamped)
    for (size_t i = 0; i < out_rows; ++i) finish_row(i, outer_scalar_swamped);
  } else {
    for (size_t i = 0; i < out_rows; ++i) finish_row(i, outer_scalar_swamped);
  }
  static constexpr const char* kRouteOf[] = {"fast.fp32", "fast.narrow_rne", "fast.narrow_rtz", "fast.fused"};
  tel.route = kRouteOf[static_cast<size_t>(op.inner)];
  tel.swamping_counted = ctx.count_swamping;
  tel.inner_swamped += op.inner_swamped;
  tel.outer_swamped += op.outer_swamped + outer_scalar_swamped;
  tel.inner_adds += m * n * op.k;
  tel.outer_adds += m * n * op.outer_terms;  // the reference adds every block term into the outer sum, from +0
}

// matmul_fast for C as double or float (CT): the value written is (CT) of the double result. An
// operand given in place (ia, ib; see arith/matmul_in_place.h) is read from there instead of ops.
// The phases: plan (is the fast path exact here?), pack (the operands in the kernel's layout, with
// their ranges), scale (block scales, alpha), the kernel, finish (output rounding, telemetry).
template <typename CT>
bool matmul_fast_impl(const PreparedOperands& ops, const InPlaceOperand* ia, const InPlaceOperand* ib, CT* c,
                      size_t ldc, const MatmulPolicy& policy, const MatmulContext& ctx, MatmulTelemetry& tel) {
  FastOperands op;
  FastPlan plan;
  if (!plan_fast(ops, ia, ib, policy, ctx, op, plan)) return false;
  if (op.m == 0 || op.n == 0) return true;
  FastScratch own;  // (used only when the caller passes no workspace)
  FastScratch& scratch = !ctx.workspace                    ? own
                         : std::is_same_v<CT, float> ? ctx.workspace->fast_float
                                                     : ctx.workspace->fast_double;
  FusedPlan plan_full, plan_tail;
  FusedModel chained;  // plan.fused_chains: the model promoting at the policy's K-blocks
  if (plan.fused_chains) {
    chained = *policy.inner.fused;
    chained.promote_every = static_cast<int>(ops.kblock);
  }
  PackedRanges ranges;
  if (plan.inner_fused)
    pack_fused(ops, plan.fused_chains ? chained : *policy.inner.fused, plan.products_fit_float, plan.W, op, scratch,
               plan_full, plan_tail, ranges);
  else
    pack_floats(ops, ia, ib, plan.W, kernel_reads_ranges(op) || plan.pairs_by_ranges, plan.pairs, op, scratch, ranges);
  if (!ranges_allow_fast(ranges, policy, ctx, plan.inner_fused, op)) return false;
  if (plan.pairs_by_ranges)
    plan.pairs = pair_ranges_exact(policy.a.format, ranges.a_min, policy.b.format, ranges.b_min);
  const double alpha = scale_blocks(ops, policy, plan.outer_scalar, op, scratch);
  // Output rounding. An fp32 output that keeps subnormals leaves every finite float unchanged: a
  // float C then comes straight from the kernel, with nothing left to do per element.
  const bool out_is_identity = is_fp32_grid_kept(policy.out_format, policy.out_round);
  const bool direct = std::is_same_v<CT, float> && out_is_identity && !plan.outer_scalar;
  if constexpr (std::is_same_v<CT, float>) {
    if (direct) {
      op.c = c;
      op.ldc = ldc;
    }
  }
  if (!direct) {
    if (scratch.c.size() < op.m * op.n) scratch.c.resize(op.m * op.n);
    op.c = scratch.c.data();
    op.ldc = op.n;
  }
  bool ran_pairs = false;
  if (op.k > 0) {
    // (The pair kernel declines a call whose values are not exact in bf16, before writing any result.)
    ran_pairs = plan.pairs && pair_matmul(op, scratch);
    if (!ran_pairs) {
      if (op.b_rows_partial) b_into_strips(ops.b.qf.data(), 1, op.n, plan.W, op, scratch);
      HWY_DYNAMIC_DISPATCH(FastMatmul)(op);  // fills op.inner_swamped / outer_swamped when counting
    }
  } else {
    for (size_t i = 0; i < op.m; ++i) std::fill(op.c + i * op.ldc, op.c + i * op.ldc + op.n, 0.0f);
  }
  if (op.nonfinite) return false;  // a non-finite result: the reference decides (and rewrites all of C)
  finish_output(op, policy, ctx, plan.outer_scalar, out_is_identity, direct, alpha, c, ldc, tel);
  // Every kernel stores +0 + its sum, or an outer sum begun at +0 (StoreResult, pair_tile), and an
  // IEEE sum is -0 only when both addends are: with alpha 1 and C written directly, none is -0.
  tel.no_negative_zero = direct && op.alpha == 1.0f;
  if (ran_pairs) tel.route = "fast.fp32_pairs";  // (the fp32 kernel's arithmetic: the route says which code ran)
  return true;
}

}  // namespace

bool matmul_fast(const PreparedOperands& ops, double* c, size_t ldc, const MatmulPolicy& policy,
                 const MatmulContext& ctx, MatmulTelemetry& tel) {
  return matmul_fast_impl(ops, nullptr, nullptr, c, ldc, policy, ctx, tel);
}

bool matmul_fast(const PreparedOperands& ops, float* c, size_t ldc, const MatmulPolicy& policy,
                 const MatmulContext& ctx, MatmulTelemetry& tel) {
  return matmul_fast_impl(ops, nullptr, nullptr, c, ldc, policy, ctx, tel);
}

bool matmul_fast_in_place(const PreparedOperands& ops, const InPlaceOperand* a, const InPlaceOperand* b, float* c,
                          size_t ldc, const MatmulPolicy& policy, const MatmulContext& ctx, MatmulTelemetry& tel) {
  return matmul_fast_impl(ops, a, b, c, ldc, policy, ctx, tel);
}

}  // namespace drift
#endif  // HWY_ONCE
