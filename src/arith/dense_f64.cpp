#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/dense_f64.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>

#include "arith/dense_f64.h"
#include "arith/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows [i0, i0 + R) x columns [j, j + 2 vectors): 2R accumulators in registers, k ascending, each
// step acc = acc + x*w as a multiply and then an add (Mul/Add: two roundings, as the scalar loop).
template <size_t R, class D>
HWY_INLINE void DenseTile(D d, double* y, const double* x, const double* w, size_t i0, size_t j, size_t c,
                          size_t oc) {
  const size_t L = hn::Lanes(d);
  hn::Vec<D> acc0[R], acc1[R];
  for (size_t r = 0; r < R; ++r) acc0[r] = acc1[r] = hn::Zero(d);
  for (size_t k = 0; k < c; ++k) {
    const auto w0 = hn::LoadU(d, w + k * oc + j), w1 = hn::LoadU(d, w + k * oc + j + L);
    for (size_t r = 0; r < R; ++r) {
      const auto xv = hn::Set(d, x[(i0 + r) * c + k]);
      acc0[r] = hn::Add(acc0[r], hn::Mul(xv, w0));
      acc1[r] = hn::Add(acc1[r], hn::Mul(xv, w1));
    }
  }
  for (size_t r = 0; r < R; ++r) {
    hn::StoreU(acc0[r], d, y + (i0 + r) * oc + j);
    hn::StoreU(acc1[r], d, y + (i0 + r) * oc + j + L);
  }
}

// Rows [i0, i1) of y.
void DenseRows(double* y, const double* x, const double* w, size_t i0, size_t i1, size_t c, size_t oc) {
  const hn::ScalableTag<double> d;
  const size_t L = hn::Lanes(d);
  size_t j = 0;
  for (; j + 2 * L <= oc; j += 2 * L) {
    size_t i = i0;
    for (; i + 8 <= i1; i += 8) DenseTile<8>(d, y, x, w, i, j, c, oc);
    for (; i + 4 <= i1; i += 4) DenseTile<4>(d, y, x, w, i, j, c, oc);
    for (; i < i1; ++i) DenseTile<1>(d, y, x, w, i, j, c, oc);
  }
  for (size_t i = i0; i < i1; ++i)  // the columns past the last whole tile, one by one
    for (size_t jj = j; jj < oc; ++jj) {
      double s = 0;
      for (size_t k = 0; k < c; ++k) s = s + x[i * c + k] * w[k * oc + jj];
      y[i * oc + jj] = s;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(DenseRows);

void dense_f64(double* y, const double* x, const double* w, size_t n, size_t c, size_t oc) {
  // Row chunks of 16 (a multiple of the 8-row tile) on a team when the call repays one.
  constexpr size_t kChunk = 16;
  const size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (worth_threads_products(n * c * oc) && chunks > 1)
  for (size_t ci = 0; ci < chunks; ++ci)
    HWY_DYNAMIC_DISPATCH(DenseRows)(y, x, w, ci * kChunk, std::min(n, (ci + 1) * kChunk), c, oc);
}

void dense_f64_scalar(double* y, const double* x, const double* w, size_t n, size_t c, size_t oc) {
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < oc; ++j) {
      double s = 0;
      for (size_t k = 0; k < c; ++k) s = s + x[i * c + k] * w[k * oc + j];
      y[i * oc + j] = s;
    }
}

std::vector<int64_t> dense_f64_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
