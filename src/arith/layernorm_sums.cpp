#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/layernorm_sums.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <vector>

#include "arith/layernorm_sums.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kLanes = 16;  // rows per pass: one per float lane of a 512-bit vector

// out[j] (j < 16) = column j0 + j of 16 rows from x (row stride ld): lane r holds x[r*ld + j0 + j].
// Four rounds of two-source shuffles: pairs of rows interleaved (floats, then pairs of floats) give,
// in each 128-bit block b, column 4b + q of four rows; the blocks are then gathered across vectors.
HWY_INLINE void Transpose16(const float* x, size_t ld, size_t j0, __m512 (&out)[kLanes]) {
  __m512 r[kLanes], t[kLanes];
  for (size_t i = 0; i < kLanes; ++i) r[i] = _mm512_loadu_ps(x + i * ld + j0);
  for (size_t i = 0; i < kLanes; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);      // per block: a0 b0 a1 b1
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);  // per block: a2 b2 a3 b3
  }
  // u[4g + q]: in block b, column 4b + q of rows 4g .. 4g + 3.
  __m512 u[kLanes];
  for (size_t g = 0; g < kLanes; g += 4) {
    const __m512d lo0 = _mm512_castps_pd(t[g]), lo1 = _mm512_castps_pd(t[g + 2]);
    const __m512d hi0 = _mm512_castps_pd(t[g + 1]), hi1 = _mm512_castps_pd(t[g + 3]);
    u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
  // Column 4b + q: block g of it is block b of u[4g + q].
  for (size_t q = 0; q < 4; ++q) {
    const __m512 s0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44);       // u0.b0 u0.b1 u1.b0 u1.b1
    const __m512 s1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xEE);       // u0.b2 u0.b3 u1.b2 u1.b3
    const __m512 s2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44);  // u2.b0 u2.b1 u3.b0 u3.b1
    const __m512 s3 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xEE);
    out[q] = _mm512_shuffle_f32x4(s0, s2, 0x88);       // block 0 of u0, u1, u2, u3
    out[4 + q] = _mm512_shuffle_f32x4(s0, s2, 0xDD);   // block 1
    out[8 + q] = _mm512_shuffle_f32x4(s1, s3, 0x88);   // block 2
    out[12 + q] = _mm512_shuffle_f32x4(s1, s3, 0xDD);  // block 3
  }
}

// The c columns of 16 rows of x (row stride c) into cols, column j at cols + 16 j (lane r: row r):
// whole 16 x 16 blocks by Transpose16, the last columns element by element.
HWY_INLINE void RowsToColumns(const float* x, size_t c, float* cols) {
  size_t j0 = 0;
  for (; j0 + kLanes <= c; j0 += kLanes) {
    __m512 v[kLanes];
    Transpose16(x, c, j0, v);
    for (size_t j = 0; j < kLanes; ++j) _mm512_storeu_ps(cols + (j0 + j) * kLanes, v[j]);
  }
  for (; j0 < c; ++j0)
    for (size_t r = 0; r < kLanes; ++r) cols[j0 * kLanes + r] = x[r * c + j0];
}

// A thread's buffer of 16 x c floats for an operand's columns (grown, never shrunk).
HWY_INLINE float* ColumnBuffer(std::vector<float>& buffer, size_t c) {
  if (buffer.size() < kLanes * c) buffer.resize(kLanes * c);
  return buffer.data();
}

void LayernormStatsImpl(const float* x, size_t n, size_t c, float* mean, float* rstd) {
  const hn::ScalableTag<float> d;
  static_assert(hn::MaxLanes(hn::ScalableTag<float>()) == kLanes, "one row per lane");
  using V = hn::Vec<decltype(d)>;
  thread_local std::vector<float> x_buffer;
  float* cols = ColumnBuffer(x_buffer, c);
  const V count = hn::Set(d, static_cast<float>(c)), eps = hn::Set(d, static_cast<float>(1e-5));
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    RowsToColumns(x + i * c, c, cols);
    V m = hn::Zero(d);
    for (size_t j = 0; j < c; ++j) m = hn::Add(m, hn::LoadU(d, cols + j * kLanes));
    m = hn::Div(m, count);
    V var = hn::Zero(d);
    for (size_t j = 0; j < c; ++j) {
      const V dev = hn::Sub(hn::LoadU(d, cols + j * kLanes), m);
      var = hn::Add(var, hn::Mul(dev, dev));
    }
    var = hn::Div(var, count);
    hn::StoreU(m, d, mean + i);
    hn::StoreU(hn::Div(hn::Set(d, 1.0f), hn::Sqrt(hn::Add(var, eps))), d, rstd + i);
  }
  layernorm_stats_scalar(x + i * c, n - i, c, mean + i, rstd + i);
}

void LayernormBackwardMeansImpl(const float* x, const float* dy, const float* w, const float* mean,
                                const float* rstd, size_t n, size_t c, float* dm_out, float* dnm_out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  thread_local std::vector<float> x_buffer, dy_buffer;
  float* xc = ColumnBuffer(x_buffer, c);
  float* dyc = ColumnBuffer(dy_buffer, c);
  const V count = hn::Set(d, static_cast<float>(c));
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    RowsToColumns(x + i * c, c, xc);
    RowsToColumns(dy + i * c, c, dyc);
    const V m = hn::LoadU(d, mean + i), s = hn::LoadU(d, rstd + i);
    V dm = hn::Zero(d), dnm = hn::Zero(d);
    for (size_t j = 0; j < c; ++j) {
      const V norm = hn::Mul(hn::Sub(hn::LoadU(d, xc + j * kLanes), m), s);
      const V dnorm = hn::Mul(hn::Set(d, w[j]), hn::LoadU(d, dyc + j * kLanes));
      dm = hn::Add(dm, dnorm);
      dnm = hn::Add(dnm, hn::Mul(dnorm, norm));
    }
    hn::StoreU(hn::Div(dm, count), d, dm_out + i);
    hn::StoreU(hn::Div(dnm, count), d, dnm_out + i);
  }
  layernorm_backward_means_scalar(x + i * c, dy + i * c, w, mean + i, rstd + i, n - i, c, dm_out + i, dnm_out + i);
}
#else
void LayernormStatsImpl(const float* x, size_t n, size_t c, float* mean, float* rstd) {
  layernorm_stats_scalar(x, n, c, mean, rstd);
}

void LayernormBackwardMeansImpl(const float* x, const float* dy, const float* w, const float* mean,
                                const float* rstd, size_t n, size_t c, float* dm, float* dnm) {
  layernorm_backward_means_scalar(x, dy, w, mean, rstd, n, c, dm, dnm);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(LayernormStatsImpl);
HWY_EXPORT(LayernormBackwardMeansImpl);

void layernorm_stats_floats(const float* x, size_t n, size_t c, float* mean, float* rstd) {
  HWY_DYNAMIC_DISPATCH(LayernormStatsImpl)(x, n, c, mean, rstd);
}

void layernorm_backward_means_floats(const float* x, const float* dy, const float* w, const float* mean,
                                     const float* rstd, size_t n, size_t c, float* dnorm_mean,
                                     float* dnorm_norm_mean) {
  HWY_DYNAMIC_DISPATCH(LayernormBackwardMeansImpl)(x, dy, w, mean, rstd, n, c, dnorm_mean, dnorm_norm_mean);
}

std::vector<int64_t> layernorm_sums_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
