// The pair kernel (matmul_pairs.h): the fp32 kernel's tiles (6 rows x 2 vectors of 16 columns, each
// K-block's inner sums in registers, then scaled and added into the outer sums) with each two
// consecutive products taken by one VDPBF16PS. Why it is the same arithmetic, step by step:
//   * The instruction computes, per fp32 lane, acc + a[2i+1]*b[2i+1], rounded to nearest even, then
//     that + a[2i]*b[2i], rounded again: the odd bf16 of each pair first (Intel's definition of
//     VDPBF16PS; measured on AMD Zen 4 against both orders and a single rounding of the three,
//     and checked on every CPU before the kernel's first use: instruction_adds_in_order).
//     The packing puts element t of the sum in the odd half and t + 1 in the even half, so the sum
//     runs over K in the fp32 kernel's order.
//   * Each product of two bf16 values has at most 16 significant bits: exact in fp32, as inside
//     the fp32 kernel's fma.
//   * The instruction reads subnormal bf16 inputs as zero and flushes subnormal results; the
//     formats keep both away (pair_formats_exact), or, for bf16, the call's data do
//     (pair_ranges_exact). Overflow rounds to infinity as an fp32 add does, and a non-finite result
//     sends the call to the reference either way.
//   * A block of odd length ends on a pair whose even half is +0: acc + (+-0) is acc, because a
//     running sum that starts at +0 is never -0 under round to nearest.
// The operands come from the fp32 kernel's packing (floats); the bf16 of an exact float is its upper
// half, so the pairs are made with shifts and masks, and a lower half that is not zero (a value
// the formats did not bound) stops the call before any result is written.
#include "arith/matmul_pairs.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <omp.h>

#include "arith/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define DRIFT_PAIRS 1
#define DRIFT_PAIRS_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))
#else
#define DRIFT_PAIRS 0
#endif

namespace drift {

namespace {

constexpr size_t kW = 32;          // columns per strip: two vectors of 16 floats (the AVX-512 strips)
constexpr size_t kRows = 6;        // rows per tile: 12 inner + 12 outer accumulators, 2 B vectors, 1 A pair
constexpr uint32_t kHigh = 0xffff0000u;

int pair_mode_for_test = -1;

#if DRIFT_PAIRS
bool cpu_has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> 5) & 1u;  // CPUID.(EAX=7, ECX=1):EAX[5], AVX512_BF16
}

float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// One lane of VDPBF16PS: acc with the pair (odd: p1 = a1 * b1, even: p0 = a0 * b0).
DRIFT_PAIRS_TARGET float dot_pair_lane(float acc, uint16_t a1, uint16_t a0, uint16_t b1, uint16_t b0) {
  const __m128i a = _mm_set1_epi32(static_cast<int>((uint32_t{a1} << 16) | a0));
  const __m128i b = _mm_set1_epi32(static_cast<int>((uint32_t{b1} << 16) | b0));
  return _mm_cvtss_f32(_mm_dpbf16_ps(_mm_set1_ps(acc), (__m128bh)a, (__m128bh)b));
}

// Whether this CPU's VDPBF16PS is the sequence the kernel relies on, fp32(fp32(acc + p1) + p0), on
// cases that tell it from the other order and from one rounding of the three (1 + 2^-24 + 2^-24:
// two ties kept at 1, where one rounding gives 1 + 2^-23; 1 + 2^-24 + 2^-23: 1 + 2^-23, where the
// other order or one rounding gives 1 + 2^-22), and on pseudo-random pairs of normal values with
// sums of every sign. Checked once, before the kernel's first use: a CPU that computed the pairs
// otherwise would run the fp32 kernel instead.
bool instruction_adds_in_order() {
  const uint16_t one = 0x3f80, t12 = 0x3980, t11 = 0x3a00;  // 1, 2^-12, 2^-11 in bf16
  if (dot_pair_lane(1.0f, t12, t12, t12, t12) != 1.0f) return false;
  if (dot_pair_lane(1.0f, t12, t11, t12, t12) != 1.0f + 0x1p-23f) return false;
  if (dot_pair_lane(1.0f, one, 0, one, 0) != 2.0f) return false;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x]() {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (int i = 0; i < 4096; ++i) {
    // bf16 values with exponents 2^-20 .. 2^11 (products and sums normal), either sign.
    auto value = [&]() {
      const uint64_t r = next();
      return static_cast<uint16_t>(((r & 1) << 15) | (((r >> 1) % 32 + 107) << 7) | ((r >> 8) & 0x7f));
    };
    const uint16_t a1 = value(), a0 = value(), b1 = value(), b0 = value();
    const uint32_t accbits = static_cast<uint32_t>(((next() & 1) << 31) | (((next() % 40) + 97) << 23) | (next() & 0x7fffff));
    float acc;
    std::memcpy(&acc, &accbits, sizeof acc);
    volatile float s = acc + bf16_value(a1) * bf16_value(b1);  // each product exact, each add rounded
    s = s + bf16_value(a0) * bf16_value(b0);
    const float want = s, got = dot_pair_lane(acc, a1, a0, b1, b0);
    if (std::memcmp(&want, &got, sizeof want) != 0) return false;
  }
  return true;
}
#endif

}  // namespace

bool pair_kernel_available() {
#if DRIFT_PAIRS
  static const bool cpu = cpu_has_avx512_bf16() && instruction_adds_in_order();
  return pair_mode_for_test != 0 && cpu;
#else
  return false;
#endif
}

void pair_kernel_set_for_test(int mode) { pair_mode_for_test = mode; }

bool pair_formats_fit(const Format& fa, const Format& fb) {
  auto fits = [](const Format& f) {
    return (f.kind == Kind::floating || f.kind == Kind::integer) && significand_bits(f) <= 8 && f.max_finite < 0x1p128;
  };
  return fits(fa) && fits(fb);
}

bool pair_ranges_exact(const Format& fa, double a_min, const Format& fb, double b_min) {
  if (std::isinf(a_min) || std::isinf(b_min)) return true;  // an operand of zeros: every product +-0
  if (a_min < 0x1p-126 || b_min < 0x1p-126) return false;
  return last_bit_exp(fa, a_min) + last_bit_exp(fb, b_min) >= -126;
}

// The data conditions at the formats' smallest values, which every value of theirs meets.
bool pair_formats_exact(const Format& fa, const Format& fb) {
  return pair_formats_fit(fa, fb) && pair_ranges_exact(fa, fa.min_positive, fb, fb.min_positive);
}

#if DRIFT_PAIRS

namespace {

// The operands as the kernel reads them: A's pairs (row i, pair q) at a[i * a_row + q * a_col]; B's
// in strips of kW columns, strip st's pair row q at b + st * b_strip + q * kW; kp pairs a row, qblock
// pairs a K-block.
struct PairOperands {
  const uint32_t* a = nullptr;
  size_t a_row = 0, a_col = 0;
  const uint32_t* b = nullptr;
  size_t b_strip = 0;
  size_t kp = 0, qblock = 0;
};

inline uint32_t bits_of_float(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// The pair of elements t (odd half: added first) and t + 1 (even half), from their floats.
inline uint32_t pair_of(float t0, float t1, uint32_t& low) {
  const uint32_t u0 = bits_of_float(t0), u1 = bits_of_float(t1);
  low |= (u0 | u1) & ~kHigh;
  return (u0 & kHigh) | (u1 >> 16);
}

// 16 lanes of uint32 as a GCC vector: the merges below in plain operators (the same instructions as
// the intrinsics, without GCC 12's false uninitialised warnings from those).
typedef uint32_t U32x16 __attribute__((vector_size(64), aligned(4)));

DRIFT_PAIRS_TARGET inline uint32_t or_lanes(U32x16 v) {
  uint32_t r = 0;
  for (int l = 0; l < 16; ++l) r |= v[l];
  return r;
}

// out[j] = pair of r0[j] and r1[j] (r1 null: +0), j < len: two rows of K merged, as B's strips and a
// k-major A need.
DRIFT_PAIRS_TARGET void merge_rows(const float* r0, const float* r1, size_t len, uint32_t* out, uint32_t& low) {
  U32x16 lowv = {};
  size_t j = 0;
  for (; j + 16 <= len; j += 16) {
    U32x16 u0, u1 = {};
    std::memcpy(&u0, r0 + j, sizeof u0);
    if (r1) std::memcpy(&u1, r1 + j, sizeof u1);
    lowv |= (u0 | u1) & ~kHigh;
    const U32x16 pair = (u0 & kHigh) | (u1 >> 16);
    std::memcpy(out + j, &pair, sizeof pair);
  }
  low |= or_lanes(lowv);
  for (; j < len; ++j) out[j] = pair_of(r0[j], r1 ? r1[j] : 0.0f, low);
}

// out[q] = pair of row[2q] and row[2q + 1] (past k: +0), q < (k + 1) / 2: one row of A whose K is
// contiguous.
DRIFT_PAIRS_TARGET void pair_row(const float* row, size_t k, uint32_t* out, uint32_t& low) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  U32x16 lowv = {};
  size_t q = 0;
  for (; 2 * q + 32 <= k; q += 16) {
    const __m512i v0 = _mm512_loadu_si512(row + 2 * q), v1 = _mm512_loadu_si512(row + 2 * q + 16);
    const U32x16 u0 = (U32x16)_mm512_permutex2var_epi32(v0, even, v1);
    const U32x16 u1 = (U32x16)_mm512_permutex2var_epi32(v0, odd, v1);
    lowv |= (u0 | u1) & ~kHigh;
    const U32x16 pair = (u0 & kHigh) | (u1 >> 16);
    std::memcpy(out + q, &pair, sizeof pair);
  }
  low |= or_lanes(lowv);
  for (; 2 * q < k; ++q) out[q] = pair_of(row[2 * q], 2 * q + 1 < k ? row[2 * q + 1] : 0.0f, low);
}

// A and B of the float kernel's packing into pairs (s.a_pairs, s.b_pairs); the lower halves' OR.
uint32_t pack_pairs(const FastOperands& op, FastScratch& s, PairOperands& p) {
  const size_t m = op.m, k = op.k, kp = (k + 1) / 2, strips = op.npad / kW;
  p.kp = kp;
  p.qblock = op.nblocks == 1 ? kp : op.kblock / 2;
  if (s.a_pairs.size() < m * kp) s.a_pairs.resize(m * kp);
  if (s.b_pairs.size() < strips * kp * kW) s.b_pairs.resize(strips * kp * kW);
  uint32_t* ap = s.a_pairs.data();
  uint32_t* bp = s.b_pairs.data();
  std::atomic<uint32_t> low{0};
  const bool parallel = worth_threads_elements(m * k + op.npad * k);
  auto note = [&low](uint32_t l) {
    if (l) low.fetch_or(l, std::memory_order_relaxed);
  };
  if (op.a_col == 1) {
    // Rows of A, K contiguous: a row of pairs each.
    p.a_row = kp;
    p.a_col = 1;
    for_each_index(m, parallel, [&](size_t i) {
      uint32_t l = 0;
      pair_row(op.a + i * op.lda, k, ap + i * kp, l);
      note(l);
    });
  } else {
    // A read where it lies, K x M (op.a_col its row stride): pair rows of M.
    p.a_row = 1;
    p.a_col = m;
    for_each_index(kp, parallel, [&](size_t q) {
      const float* r0 = op.a + 2 * q * op.a_col;
      uint32_t l = 0;
      merge_rows(r0, 2 * q + 1 < k ? r0 + op.a_col : nullptr, m, ap + q * m, l);
      note(l);
    });
  }
  // B's float strips, or its K x N rows where it lies, whose last strip may end before kW columns:
  // the columns past n are zero pairs, as the float strips' are zeros.
  for_each_index(strips, parallel, [&](size_t st) {
    const float* strip = op.b + st * op.b_strip;
    const size_t cols = op.b_rows_partial ? std::min(kW, op.n - st * kW) : kW;
    uint32_t l = 0;
    for (size_t q = 0; q < kp; ++q) {
      const float* r0 = strip + 2 * q * op.b_row;
      uint32_t* out = bp + (st * kp + q) * kW;
      merge_rows(r0, 2 * q + 1 < k ? r0 + op.b_row : nullptr, cols, out, l);
      std::fill(out + cols, out + kW, 0u);
    }
    note(l);
  });
  p.a = ap;
  p.b = bp;
  p.b_strip = kp * kW;
  return low.load();
}

// One tile: rows [i0, i0 + rows) x columns [j0, j0 + 32), as the fp32 kernel's Tile computes it
// (scaled: the outer sum + inner * fp32(sa * sb) by two multiplies and an add; unscaled: + inner).
DRIFT_PAIRS_TARGET void pair_tile(const FastOperands& op, const PairOperands& p, size_t i0, size_t rows, size_t j0,
                                  bool* nonfinite) {
  const bool scaled = op.sa || op.sb;
  const uint32_t* strip = p.b + (j0 / kW) * p.b_strip;
  const uint32_t* ar[kRows];
  const float* sar[kRows];  // each row's block scales (op.sa: m x nblocks)
  for (size_t r = 0; r < kRows; ++r) {
    const size_t i = i0 + std::min(r, rows - 1);  // (rows past a partial tile: computed, never stored)
    ar[r] = p.a + i * p.a_row;
    sar[r] = op.sa ? op.sa + i * op.nblocks : nullptr;
  }
  __m512 outer[kRows][2];
  for (size_t r = 0; r < kRows; ++r) outer[r][0] = outer[r][1] = _mm512_setzero_ps();
  for (size_t bi = 0; bi < op.nblocks; ++bi) {
    const size_t q0 = bi * p.qblock, q1 = std::min(p.kp, q0 + p.qblock);
    __m512 acc[kRows][2];
    for (size_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const uint32_t* bq = strip + q0 * kW;
    for (size_t q = q0; q < q1; ++q, bq += kW) {
      const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bq), b1 = (__m512bh)_mm512_loadu_si512(bq + 16);
      for (size_t r = 0; r < kRows; ++r) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(ar[r][q * p.a_col]));
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
      }
    }
    if (scaled) {
      const __m512 one = _mm512_set1_ps(1.0f);
      const __m512 sb0 = op.sb ? _mm512_loadu_ps(op.sb + bi * op.npad + j0) : one;
      const __m512 sb1 = op.sb ? _mm512_loadu_ps(op.sb + bi * op.npad + j0 + 16) : one;
      for (size_t r = 0; r < kRows; ++r) {
        const __m512 sa = op.sa ? _mm512_set1_ps(sar[r][bi]) : one;
        acc[r][0] = _mm512_mul_ps(acc[r][0], _mm512_mul_ps(sa, sb0));
        acc[r][1] = _mm512_mul_ps(acc[r][1], _mm512_mul_ps(sa, sb1));
      }
    }
    for (size_t r = 0; r < kRows; ++r) {
      outer[r][0] = _mm512_add_ps(outer[r][0], acc[r][0]);
      outer[r][1] = _mm512_add_ps(outer[r][1], acc[r][1]);
    }
  }
  // Into C as the float kernel stores (StoreResult): times alpha where it is not 1, a non-finite
  // result flagged, a last strip's columns past n left alone.
  const __m512 alpha = _mm512_set1_ps(op.alpha);
  const __m512 largest = _mm512_set1_ps(0x1.fffffep127f);
  __mmask16 bad = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t h = 0; h < 2; ++h) {
      const size_t j = j0 + h * 16;
      __m512 y = outer[r][h];
      if (op.alpha != 1.0f) y = _mm512_mul_ps(y, alpha);
      bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(y), largest, _CMP_NLE_UQ);
      float* dst = op.c + (i0 + r) * op.ldc + j;
      if (j + 16 <= op.n) _mm512_storeu_ps(dst, y);
      else if (j < op.n) _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << (op.n - j)) - 1), y);
    }
  if (bad) *nonfinite = true;
}

// The tiles of row tiles [rt0, rt1) over every column, by panels of B that stay in cache while the
// row tiles pass over them (as the float kernel walks them).
DRIFT_PAIRS_TARGET void pair_tiles(const FastOperands& op, const PairOperands& p, size_t rt0, size_t rt1,
                                   bool* nonfinite) {
  const size_t panel = std::max(kW, (size_t{64} * 1024 / sizeof(uint32_t) / std::max<size_t>(p.kp, 1)) / kW * kW);
  for (size_t p0 = 0; p0 < op.npad; p0 += panel) {
    const size_t p1 = std::min(op.npad, p0 + panel);
    for (size_t rt = rt0; rt < rt1; ++rt) {
      const size_t i0 = rt * kRows, rows = std::min(kRows, op.m - i0);
      for (size_t j0 = p0; j0 < p1; j0 += kW) pair_tile(op, p, i0, rows, j0, nonfinite);
    }
  }
}

}  // namespace

bool pair_matmul(FastOperands& op, FastScratch& s) {
  PairOperands p;
  if (pack_pairs(op, s, p) != 0) return false;
  const size_t row_tiles = (op.m + kRows - 1) / kRows;
  // Each thread owns a fixed range of row tiles: which thread computes a tile changes no bit.
  auto run = [&](size_t threads, size_t t) {
    bool nonfinite = false;
    pair_tiles(op, p, row_tiles * t / threads, row_tiles * (t + 1) / threads, &nonfinite);
    if (nonfinite) {
#pragma omp atomic write
      op.nonfinite = true;
    }
  };
  if (!op.parallel) {
    run(1, 0);
    return true;
  }
#pragma omp parallel
  run(static_cast<size_t>(omp_get_num_threads()), static_cast<size_t>(omp_get_thread_num()));
  return true;
}

#else

bool pair_matmul(FastOperands&, FastScratch&) { return false; }

#endif

}  // namespace drift
