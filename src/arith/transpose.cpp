#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/transpose.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <omp.h>

#include <algorithm>

#include "arith/parallel.h"
#include "arith/transpose.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One column panel [c0, c1) of the transpose: every source row's piece of it, in 4 x 4 blocks.
HWY_INLINE void TransposePanel(const float* src, size_t rows, size_t c0, size_t c1, size_t lds, float* dst,
                               size_t ldd, bool add) {
  size_t r = 0;
#if HWY_TARGET != HWY_SCALAR
  // Four source rows loaded, two rounds of interleaving, four destination rows stored.
  const hn::Full128<float> d4;
  for (; r + 4 <= rows; r += 4) {
    const float* s0 = src + r * lds;
    size_t c = c0;
    for (; c + 4 <= c1; c += 4) {
      const auto a = hn::LoadU(d4, s0 + c), b = hn::LoadU(d4, s0 + lds + c);
      const auto e = hn::LoadU(d4, s0 + 2 * lds + c), f = hn::LoadU(d4, s0 + 3 * lds + c);
      const auto ab_lo = hn::InterleaveLower(d4, a, b), ef_lo = hn::InterleaveLower(d4, e, f);  // a0 b0 a1 b1 | e0 f0 e1 f1
      const auto ab_hi = hn::InterleaveUpper(d4, a, b), ef_hi = hn::InterleaveUpper(d4, e, f);  // a2 b2 a3 b3 | e2 f2 e3 f3
      decltype(a) out[4] = {hn::ConcatLowerLower(d4, ef_lo, ab_lo), hn::ConcatUpperUpper(d4, ef_lo, ab_lo),
                            hn::ConcatLowerLower(d4, ef_hi, ab_hi), hn::ConcatUpperUpper(d4, ef_hi, ab_hi)};
      for (size_t q = 0; q < 4; ++q) {
        float* p = dst + (c + q) * ldd + r;
        hn::StoreU(add ? hn::Add(hn::LoadU(d4, p), out[q]) : out[q], d4, p);
      }
    }
    for (; c < c1; ++c)
      for (size_t q = 0; q < 4; ++q) {
        float& y = dst[c * ldd + r + q];
        y = add ? y + src[(r + q) * lds + c] : src[(r + q) * lds + c];
      }
  }
#endif
  for (; r < rows; ++r)
    for (size_t c = c0; c < c1; ++c) {
      float& y = dst[c * ldd + r];
      y = add ? y + src[r * lds + c] : src[r * lds + c];
    }
}

// Panels of 8 columns: the 8 destination rows being filled stay in L1 while the source rows pass
// their pieces. With a power-of-two destination stride every one of those rows falls into the same
// cache sets, and L1 holds 8 to 12 lines per set: 16-column panels ran 3.4x slower on a
// 1024 x 128 transpose, 32-column ones 3.5x slower on a 512 x 512 transpose-add. Source rows go in
// blocks of 64 through two neighbouring panels, so the second reads the source lines of the first
// (one line: 16 floats) from L1.
constexpr size_t kPanel = 8, kRowBlock = 64;

// Part `part` of `parts` of the transpose: its share of the pairs of panels (whole pairs, so that
// every part writes its own destination rows).
void TransposeFloats(const float* src, size_t rows, size_t cols, size_t lds, float* dst, size_t ldd, bool add,
                     size_t part, size_t parts) {
  const size_t pairs = (cols + 2 * kPanel - 1) / (2 * kPanel);
  const size_t pair0 = pairs * part / parts, pair1 = pairs * (part + 1) / parts;
  for (size_t c0 = pair0 * 2 * kPanel; c0 < std::min(cols, pair1 * 2 * kPanel); c0 += 2 * kPanel)
    for (size_t r0 = 0; r0 < rows; r0 += kRowBlock)
      for (size_t p = c0; p < std::min(cols, c0 + 2 * kPanel); p += kPanel)
        TransposePanel(src + r0 * lds, std::min(kRowBlock, rows - r0), p, std::min(cols, p + kPanel), lds, dst + r0,
                       ldd, add);
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(TransposeFloats);

void transpose_floats(const float* src, size_t rows, size_t cols, size_t lds, float* dst, size_t ldd, bool add) {
  // Large transposes split the pairs of panels over a team (outside other teams): each writes its
  // own destination rows. (The split is made here, outside the SIMD code: a closure built there in
  // vector registers left their upper halves dirty on return, and the SSE code after a call paid
  // for it, 40x over in a softmax's expf loop.)
  const bool team = worth_threads_elements(rows * cols) && !omp_in_parallel();
  const size_t parts = team ? static_cast<size_t>(omp_get_max_threads()) : 1;
  for_each_index(parts, team && parts > 1,
                 [&](size_t t) { HWY_DYNAMIC_DISPATCH(TransposeFloats)(src, rows, cols, lds, dst, ldd, add, t, parts); });
}

void transpose_floats_scalar(const float* src, size_t rows, size_t cols, size_t lds, float* dst, size_t ldd,
                             bool add) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      float& y = dst[c * ldd + r];
      y = add ? y + src[r * lds + c] : src[r * lds + c];
    }
}

std::vector<int64_t> transpose_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
