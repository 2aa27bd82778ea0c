// Tiled kernels for the fused tensor-core models: a 64 x 64 tile of C per block of 256 threads,
// 4 x 4 outputs per thread, the operands' K-tiles (kt products of 64 rows each) in shared memory.
// Each output runs matmul_element's arithmetic for a fused inner sum and a sequential outer sum:
// fused_dot over a K-block is the same value taken K-tile by K-tile, carrying its running sum from
// one tile to the next, because every tile holds whole groups and whole promotion chunks, or (the
// register-blocked kernel, promotion intervals above 32) whole groups of one chunk, whose chain is
// carried too (fused_tile_k). Tiling only decides who loads what.
//
// Two kernels share that frame:
//   * fused_tile_kernel: fused_dot per output (group_at or group_in_double per group): any model;
//   * fused_cut_tile_kernel<T>: for the models whose groups are exact in double (or float, T): the
//     group_in_double arithmetic register-blocked over the thread's 16 outputs, with each operand's
//     alignment code computed once per tile instead of once per product, and each term cut by
//     cut_to_integer (an fma, not a conversion-rate rounding instruction). Tiles holding an operand
//     outside the route's exact range (NaN, infinity, or wider than the route multiplies exactly)
//     and groups whose result it cannot round (group_in_double's declines) go through group_of
//     on the operands in global memory instead: the same value.
#include "backend/cuda/fused_tile_kernels.h"

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/launch.h"

namespace drift::cuda {
namespace {

constexpr int kFT = 64, kFTM = 4, kFTThreads = 256, kMaxFusedK = 32;

using Tile = double[kFTM][kFTM];

// The per-output steps around the K-tiles, each out of line: the loops over a thread's 16 outputs
// are unrolled (an array indexed by a loop variable lives in local memory), without inlining each
// step 16 times. The functions taking whole tiles are out of line too, so that the running inner
// and outer sums wait in local memory and the registers go to cut_group's products.

// K-block bi closed for output (i, j): its inner sum (len products) scaled and added into outer,
// as matmul_element does.
template <bool kCount>
__device__ DRIFT_NOINLINE double close_element(const ElementPlan& p, uint64_t i, uint64_t j, uint64_t bi,
                                               uint64_t len, double inner, double outer, ElementCounts* local) {
  const uint64_t base = element_base(p, i, j);
  if (kCount) local->inner_adds += len;
  const double term = block_term_of(p, i, j, bi, inner, base);
  return outer_summer(p, base, kCount ? local : nullptr).add(outer, term, bi);
}

__device__ DRIFT_NOINLINE double output_element(const ElementPlan& p, uint64_t i, uint64_t j, double outer) {
  return element_output(p, i, j, outer);
}

template <bool kCount>
__device__ DRIFT_NOINLINE void close_block(const ElementPlan& p, uint64_t row0, uint64_t col0, int ty, int tx,
                                           uint64_t bi, uint64_t len, const Tile& inner, Tile& outer,
                                           ElementCounts& local) {
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) {
      const uint64_t i = row0 + ty * kFTM + r, j = col0 + tx * kFTM + q;
      if (i < p.m && j < p.n) outer[r][q] = close_element<kCount>(p, i, j, bi, len, inner[r][q], outer[r][q], &local);
    }
}

template <bool kCount>
__device__ DRIFT_NOINLINE void write_outputs(const ElementPlan& p, uint64_t row0, uint64_t col0, int ty, int tx,
                                             const Tile& outer, double* c, const ElementCounts& local,
                                             unsigned long long* counts) {
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) {
      const uint64_t i = row0 + ty * kFTM + r, j = col0 + tx * kFTM + q;
      if (i < p.m && j < p.n) c[i * p.n + j] = output_element(p, i, j, outer[r][q]);
    }
  if (kCount) {
    atomicAdd(counts + 0, static_cast<unsigned long long>(local.inner_adds));
    atomicAdd(counts + 2, static_cast<unsigned long long>(local.outer_adds));
    atomicAdd(counts + 3, static_cast<unsigned long long>(local.outer_swamped));
  }
}

// A thread's place: its index in the block, its 4 x 4 outputs (rows row0 + 4 ty + r, columns
// col0 + 4 tx + q).
struct TileThread {
  int tid, tx, ty;
  uint64_t row0, col0;
};

// The frame both kernels share: the K-blocks in order, each block's K-tiles in order
// (sum_tile(th, k0, t0, tl, len, inner) adds products [k0 + t0, k0 + t0 + tl) of a block of len
// into the thread's inner sums, staging included), each block closed into the outer sums, the
// outputs written.
template <bool kCount, class SumTile>
__device__ void tile_frame(const ElementPlan& p, int kt, double* c, unsigned long long* counts, SumTile&& sum_tile) {
  const int tid = threadIdx.x;
  const TileThread th{tid, tid % 16, tid / 16, static_cast<uint64_t>(blockIdx.y) * kFT,
                      static_cast<uint64_t>(blockIdx.x) * kFT};
  ElementCounts local;
  Tile outer = {};
  for (uint64_t bi = 0; bi < p.nblocks; ++bi) {
    const uint64_t k0 = bi * p.kblock, len = p.k - k0 < p.kblock ? p.k - k0 : p.kblock;
    Tile inner = {};
    for (uint64_t t0 = 0; t0 < len; t0 += kt)
      sum_tile(th, k0, t0, len - t0 < static_cast<uint64_t>(kt) ? static_cast<int>(len - t0) : kt, len, inner);
    close_block<kCount>(p, th.row0, th.col0, th.ty, th.tx, bi, len, inner, outer, local);
  }
  write_outputs<kCount>(p, th.row0, th.col0, th.ty, th.tx, outer, c, local, counts);
}

template <bool kCount>
__global__ void __launch_bounds__(kFTThreads)
    fused_tile_kernel(ElementPlan p, int kt, double* c, unsigned long long* counts) {
  __shared__ double As[kFT][kMaxFusedK + 1];  // (+1: rows of B read together fall in different banks)
  __shared__ double Bs[kFT][kMaxFusedK + 1];
  tile_frame<kCount>(p, kt, c, counts, [&](const TileThread& th, uint64_t k0, uint64_t t0, int tl, uint64_t, Tile& inner) {
    for (int e = th.tid; e < kFT * kt; e += kFTThreads) {
      const int r = e / kt, kk = e % kt;
      const uint64_t ra = th.row0 + r, rb = th.col0 + r, kg = k0 + t0 + kk;
      As[r][kk] = (ra < p.m && kk < tl) ? p.a[ra * p.k + kg] : 0.0;
      Bs[r][kk] = (rb < p.n && kk < tl) ? p.b[rb * p.k + kg] : 0.0;
    }
    __syncthreads();
    // (Not unrolled: each call inlines the whole fused model; the sums live in local memory.)
#pragma unroll 1
    for (int r = 0; r < kFTM; ++r)
#pragma unroll 1
      for (int q = 0; q < kFTM; ++q)
        inner[r][q] = fused_dot(inner[r][q], As[th.ty * kFTM + r], Bs[th.tx * kFTM + q], tl, p.model, p.fused_in_double);
    __syncthreads();
  });
}

// ---- The register-blocked kernel --------------------------------------------------------------

// The arithmetic it computes a plan's groups in: float where the model's cut terms, their sums and
// the products of the operand formats are exact in float, double where fused_groups_exact_in_double
// holds (ElementPlan::fused_in_double), else none (fused_tile_kernel).
enum class CutArithmetic { none, in_double, in_float };

CutArithmetic cut_arithmetic(const ElementPlan& p) {
  if (!p.fused || !p.fused_in_double) return CutArithmetic::none;
  // In float: each cut term below 2^(kept_bits + 2) <= 2^22 (cut_to_integer's range) and a group's
  // terms + 1 of them adding exactly (below 2^24); the operands are checked tile by tile.
  const int kept = p.model.kept_bits;
  if (kept + 2 <= 22 && (static_cast<double>(p.model.terms) + 1) * pow2(kept + 2) <= 0x1p24)
    return CutArithmetic::in_float;
  return CutArithmetic::in_double;
}

template <class T>
struct CutRoute;

// Operands whose pairwise products are exact normal floats (at most 12 significant bits, exponents
// in [-50, 62]: the fp8 and fp16 grids), and scales 2^-q that are normal floats. A group with a
// non-zero product then has E >= -100 and q >= -100 - kept_bits > -127: a q below -127 means
// that every product is zero.
template <>
struct CutRoute<float> {
  static DRIFT_HD bool operand_ok(double v) {
    if (v == 0) return true;
    const uint64_t u = bits_of(v);
    const int e = static_cast<int>((u >> 52) & 0x7ff) - 1023;
    return e >= -50 && e <= 62 && (u & ((uint64_t{1} << 41) - 1)) == 0;
  }
  static DRIFT_HD bool scale_ok(int q) { return q >= -127 && q <= 126; }
  static DRIFT_HD float scale_of(int q) { return float_of(static_cast<uint32_t>(127 - q) << 23); }
};

// Operands that fit in float (their products are exact doubles); every group's scale is a double.
template <>
struct CutRoute<double> {
  static DRIFT_HD bool operand_ok(double v) {
    return !is_nan(v) && !is_inf(v) && static_cast<double>(static_cast<float>(v)) == v;
  }
  static DRIFT_HD bool scale_ok(int) { return true; }
  static DRIFT_HD double scale_of(int q) { return pow2(-q); }
};

// A K-tile in shared memory, k-major (the 4 rows a thread reads at one k lie side by side): the
// operands in the route's type and their alignment codes (fused_detail::align_code).
template <class T>
struct CutTile {
  T a[kMaxFusedK][kFT + 1];  // (+1: a warp's stores of consecutive k fall in different banks)
  T b[kMaxFusedK][kFT + 1];
  int16_t ea[kMaxFusedK][kFT + 1];
  int16_t eb[kMaxFusedK][kFT + 1];
};

// visit(r, q, a, b) for each of the thread's 16 outputs (r, q) with the tile's entries at product
// kk of its rows (ty * 4 + r of A, tx * 4 + q of B): 8 shared-memory loads for 16 pairs.
template <class V, class Visit>
__device__ void for_thread_pairs(const V (&ta)[kMaxFusedK][kFT + 1], const V (&tb)[kMaxFusedK][kFT + 1], int kk,
                                 int ty, int tx, Visit&& visit) {
  V a[kFTM], b[kFTM];
#pragma unroll
  for (int r = 0; r < kFTM; ++r) a[r] = ta[kk][ty * kFTM + r];
#pragma unroll
  for (int q = 0; q < kFTM; ++q) b[q] = tb[kk][tx * kFTM + q];
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) visit(r, q, a[r], b[q]);
}

// group_of for output (i, j) over the products k0 + pos(i), i < n, read from global memory.
template <class Pos>
__device__ DRIFT_NOINLINE double group_element(const ElementPlan& p, uint64_t i, uint64_t j, uint64_t k0, int n,
                                               Pos pos, double c) {
  return fused_detail::group_of(p.fused_in_double, c, p.a + i * p.k + k0, 1, p.b + j * p.k + k0, 1, n, pos, p.model);
}

// The same group for each of the thread's outputs (a tile holding operands outside the route).
template <class Pos>
__device__ void group_from_global(const ElementPlan& p, uint64_t row0, uint64_t col0, int ty, int tx, uint64_t k0,
                                  int n, Pos pos, Tile& acc) {
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) {
      const uint64_t i = row0 + ty * kFTM + r, j = col0 + tx * kFTM + q;
      if (i < p.m && j < p.n) acc[r][q] = group_element(p, i, j, k0, n, pos, acc[r][q]);
    }
}

// One group (products off + pos(i), i < n, of the tile) for the thread's 16 outputs, each acc the
// group's c and then its result: group_in_double's arithmetic in T. kg is the tile's first product
// in global memory, for the outputs group_in_double declines.
template <class T, class Pos>
__device__ void cut_group(const CutTile<T>& t, int ty, int tx, int off, int n, Pos pos, const ElementPlan& p,
                          uint64_t row0, uint64_t col0, uint64_t kg, Tile& acc) {
  using namespace fused_detail;
  const FusedModel& m = p.model;
  int qx[kFTM][kFTM];
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) qx[r][q] = group_start_exp(acc[r][q], m);
  for (int i = 0; i < n; ++i)
    for_thread_pairs(t.ea, t.eb, off + static_cast<int>(pos(i)), ty, tx, [&](int r, int q, int ea, int eb) {
      qx[r][q] = ea + eb > qx[r][q] ? ea + eb : qx[r][q];
    });
  T scale[kFTM][kFTM], sum[kFTM][kFTM];
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) {
      qx[r][q] -= m.kept_bits;
      scale[r][q] = CutRoute<T>::scale_ok(qx[r][q]) ? CutRoute<T>::scale_of(qx[r][q]) : T(0);
      // Starting from +0 turns a cut -0 into +0, as group_in_double. (A c that is not finite
      // gives a value discarded below.)
      sum[r][q] = T(0) + cut_to_integer(static_cast<T>(acc[r][q]), scale[r][q]);
    }
  for (int i = 0; i < n; ++i)
    for_thread_pairs(t.a, t.b, off + static_cast<int>(pos(i)), ty, tx, [&](int r, int q, T x, T y) {
      sum[r][q] += cut_to_integer(x * y, scale[r][q]);
    });
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) {
      const uint64_t i = row0 + ty * kFTM + r, j = col0 + tx * kFTM + q;
      const double c = acc[r][q];
      // Below the float route's scales, a group of zero products and a zero c: +0, at any scale.
      const bool scaled = CutRoute<T>::scale_ok(qx[r][q]) || (c == 0 && qx[r][q] < -127);
      double result;
      if (!is_nan(c) && !is_inf(c) && scaled && round_cut_sum(static_cast<double>(sum[r][q]), qx[r][q], m, &result))
        acc[r][q] = result;
      else if (i < p.m && j < p.n)
        acc[r][q] = group_element(p, i, j, kg + off, n, pos, c);
    }
}

// The products [t0, t0 + tl) of a K-block of len products (global offset kg = the block's start +
// t0) for the thread's outputs: fused_dot_strided's promotion chunks and chains over the block,
// taken tile by tile. acc is the running value (the outer promotion sum where the model promotes),
// chain the current promotion chunk's chain, carried from tile to tile when a chunk spans several.
// Every tile starts at a group boundary of its chunk (fused_tile_k), so for_each_chain_group over
// a tile's part of a chunk forms the chunk's own groups. outside: the tile holds an operand the
// route cannot multiply exactly; its groups are read from global memory instead.
template <class T>
__device__ void cut_tile(const CutTile<T>& t, bool outside, int ty, int tx, uint64_t t0, int tl, uint64_t len,
                         const ElementPlan& p, uint64_t row0, uint64_t col0, uint64_t kg, Tile& acc, Tile& chain) {
  const FusedModel& m = p.model;
  auto run_groups = [&](int s0, int seg, Tile& c) {
    for_each_chain_group(seg, m, [&](int s, int n, auto pos) {
      if (outside) group_from_global(p, row0, col0, ty, tx, kg + s0 + s, n, pos, c);
      else cut_group(t, ty, tx, s0 + s, n, pos, p, row0, col0, kg, c);
    });
  };
  if (m.promote_every <= 0) {
    run_groups(0, tl, acc);
    return;
  }
  const uint64_t every = static_cast<uint64_t>(m.promote_every);
  for (int s0 = 0; s0 < tl;) {
    const uint64_t at = (t0 + s0) % every;  // where the tile's part starts in its chunk
    if (at == 0) {
#pragma unroll
      for (int r = 0; r < kFTM; ++r)
#pragma unroll
        for (int q = 0; q < kFTM; ++q) chain[r][q] = 0.0;
    }
    const int seg = every - at < static_cast<uint64_t>(tl - s0) ? static_cast<int>(every - at) : tl - s0;
    run_groups(s0, seg, chain);
    s0 += seg;
    if (at + seg == every || t0 + s0 == len) {  // the chunk is complete
#pragma unroll
      for (int r = 0; r < kFTM; ++r)
#pragma unroll
        for (int q = 0; q < kFTM; ++q) acc[r][q] = fused_promote_add(acc[r][q], chain[r][q], m);
    }
  }
}

template <class T, bool kCount>
__global__ void __launch_bounds__(kFTThreads)
    fused_cut_tile_kernel(ElementPlan p, int kt, double* c, unsigned long long* counts) {
  __shared__ CutTile<T> t;
  Tile chain;  // (cut_tile resets it where each promotion chunk starts, the start of every K-block included)
  tile_frame<kCount>(p, kt, c, counts, [&](const TileThread& th, uint64_t k0, uint64_t t0, int tl, uint64_t len,
                                           Tile& inner) {
    bool outside = false;  // an operand this route cannot multiply exactly
    for (int e = th.tid; e < kFT * kt; e += kFTThreads) {
      const int r = e / kt, kk = e % kt;
      const uint64_t ra = th.row0 + r, rb = th.col0 + r, kg = k0 + t0 + kk;
      const double x = (ra < p.m && kk < tl) ? p.a[ra * p.k + kg] : 0.0;
      const double y = (rb < p.n && kk < tl) ? p.b[rb * p.k + kg] : 0.0;
      outside = outside || !CutRoute<T>::operand_ok(x) || !CutRoute<T>::operand_ok(y);
      t.a[kk][r] = static_cast<T>(x);
      t.b[kk][r] = static_cast<T>(y);
      t.ea[kk][r] = static_cast<int16_t>(fused_detail::align_code(x, p.model.in_emin));
      t.eb[kk][r] = static_cast<int16_t>(fused_detail::align_code(y, p.model.in_emin));
    }
    outside = __syncthreads_or(outside);
    cut_tile(t, outside, th.ty, th.tx, t0, tl, len, p, th.row0, th.col0, k0 + t0, inner, chain);
    __syncthreads();
  });
}

template <class Kernel>
void launch_tiles(Kernel kernel, const ElementPlan& plan, int kt, double* c, unsigned long long* counts,
                  cudaStream_t stream) {
  if (plan.m == 0 || plan.n == 0) return;
  const dim3 grid(static_cast<unsigned>((plan.n + kFT - 1) / kFT), static_cast<unsigned>((plan.m + kFT - 1) / kFT));
  DRIFT_LAUNCH(kernel, grid, kFTThreads, 0, stream)(plan, kt, c, counts);
  check(cudaGetLastError(), "fused tile kernel launch");
}

}  // namespace

int fused_tile_k(const ElementPlan& p) {
  if (!p.fused || p.outer.order != SumOrder::sequential || p.outer_order) return 0;
  const FusedModel& m = p.model;
  const int group = m.interleave > 0 ? 2 * m.terms : m.terms;
  const int every = m.promote_every;
  if (group <= 0 || group > kMaxFusedK || (every > 0 && every % group != 0)) return 0;
  if (every <= 0) return kMaxFusedK / group * group;
  if (every <= kMaxFusedK) return kMaxFusedK / every * every;  // whole chunks per tile
  // Chunks of several tiles: only the register-blocked kernel carries a chain from tile to tile.
  if (cut_arithmetic(p) == CutArithmetic::none) return 0;
  for (int kt = kMaxFusedK / group * group;; kt -= group)  // (group itself divides every)
    if (every % kt == 0) return kt;
}

const char* launch_fused_tile_kernel(const ElementPlan& plan, int kt, double* c, unsigned long long* counts,
                                     cudaStream_t stream) {
  switch (cut_arithmetic(plan)) {
    case CutArithmetic::in_float:
      if (counts) launch_tiles(fused_cut_tile_kernel<float, true>, plan, kt, c, counts, stream);
      else launch_tiles(fused_cut_tile_kernel<float, false>, plan, kt, c, nullptr, stream);
      return "tiled-float";
    case CutArithmetic::in_double:
      if (counts) launch_tiles(fused_cut_tile_kernel<double, true>, plan, kt, c, counts, stream);
      else launch_tiles(fused_cut_tile_kernel<double, false>, plan, kt, c, nullptr, stream);
      return "tiled-double";
    case CutArithmetic::none:
      break;
  }
  if (counts) launch_tiles(fused_tile_kernel<true>, plan, kt, c, counts, stream);
  else launch_tiles(fused_tile_kernel<false>, plan, kt, c, nullptr, stream);
  return "tiled";
}

}  // namespace drift::cuda
