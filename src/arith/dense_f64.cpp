#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/dense_f64.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "arith/dense_f64.h"
#include "arith/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows [i0, i0 + R) x columns [j, j + NP panels): 2 NP R accumulators in registers, k ascending,
// each step acc = acc + x*w as a multiply and then an add (Mul/Add: two roundings, as the scalar
// loop). `panel` holds w's columns [j, j + 2L) as c rows of 2L contiguous doubles, and the next
// panel, columns [j + 2L, j + 4L), starts c * 2L doubles after it.
template <size_t R, size_t NP, class D>
HWY_INLINE void DenseTile(D d, double* y, const double* x, const double* panel, size_t i0, size_t j, size_t c,
                          size_t oc) {
  const size_t L = hn::Lanes(d), P = 2 * L;
  hn::Vec<D> acc[R][2 * NP];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < 2 * NP; ++v) acc[r][v] = hn::Zero(d);
  for (size_t k = 0; k < c; ++k) {
    hn::Vec<D> w[2 * NP];
    for (size_t p = 0; p < NP; ++p) {
      w[2 * p] = hn::LoadU(d, panel + p * c * P + k * P);
      w[2 * p + 1] = hn::LoadU(d, panel + p * c * P + k * P + L);
    }
    for (size_t r = 0; r < R; ++r) {
      const auto xv = hn::Set(d, x[(i0 + r) * c + k]);
      for (size_t v = 0; v < 2 * NP; ++v) acc[r][v] = hn::Add(acc[r][v], hn::Mul(xv, w[v]));
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < 2 * NP; ++v) hn::StoreU(acc[r][v], d, y + (i0 + r) * oc + j + v * L);
}

// The tiles of rows [i0, i1) over the `panels` whole panels (panel p, columns from j = p * 2L,
// starting at packed + p * c * 2L). With 32 vector registers (AVX-512), panels in pairs under 6 rows: 24
// accumulators, and each x broadcast serves four vectors of w rather than two (the broadcasts had
// taken issue slots from the multiplies and adds: on Zen 4 one core ran 18.4 G multiply-adds a
// second with 8 rows x one panel, 23.5 G with 6 rows x two, against a peak of 26 G); an odd last
// panel, and other targets, one panel at a time.
template <class D>
HWY_INLINE void DenseRows(D d, double* y, const double* x, const double* packed, size_t i0, size_t i1, size_t panels,
                          size_t c, size_t oc) {
  const size_t P = 2 * hn::Lanes(d);
  size_t p = 0;
#if HWY_TARGET <= HWY_AVX3
  for (; p + 2 <= panels; p += 2) {
    const double* panel = packed + p * c * P;
    size_t i = i0;
    for (; i + 6 <= i1; i += 6) DenseTile<6, 2>(d, y, x, panel, i, p * P, c, oc);
    for (; i + 3 <= i1; i += 3) DenseTile<3, 2>(d, y, x, panel, i, p * P, c, oc);
    for (; i < i1; ++i) DenseTile<1, 2>(d, y, x, panel, i, p * P, c, oc);
  }
#endif
  // One panel: 8 rows (16 accumulators) where there are 32 vector registers; the other x86
  // targets have 16, which 8 rows overfill: 6 rows there (in a standalone loop with AVX2 on the
  // same core, 15.1-16.0 G a second with 8 rows, 21.3-24.8 G with 6).
  constexpr size_t kRows = (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) ? 6 : 8;
  for (; p < panels; ++p) {
    const double* panel = packed + p * c * P;
    size_t i = i0;
    for (; i + kRows <= i1; i += kRows) DenseTile<kRows, 1>(d, y, x, panel, i, p * P, c, oc);
    for (; i + kRows / 2 <= i1; i += kRows / 2) DenseTile<kRows / 2, 1>(d, y, x, panel, i, p * P, c, oc);
    for (; i < i1; ++i) DenseTile<1, 1>(d, y, x, panel, i, p * P, c, oc);
  }
}

size_t PanelWidth() { return 2 * hn::Lanes(hn::ScalableTag<double>()); }

// w's whole tiles of columns copied into panels (c x P contiguous doubles each, P = PanelWidth()):
// read in place, a tile's rows lie oc doubles apart, and at the power-of-two widths models use they
// all fall into one L1 cache set, so every load went to L2 (3x slower).
void PackPanels(double* packed, const double* w, size_t c, size_t oc, bool parallel) {
  const size_t P = PanelWidth(), panels = oc / P;
  for_each_index(panels, parallel, [&](size_t p) {
    double* dst = packed + p * c * P;
    for (size_t k = 0; k < c; ++k)
      for (size_t l = 0; l < P; ++l) dst[k * P + l] = w[k * oc + p * P + l];
  });
}

// The whole product from w's panels (packed by PackPanels for this target). Rows are split over a
// team when `parallel` (each row's sums are the same whichever thread forms them), in blocks whose
// x rows stay in L2 while every panel passes over them.
void DenseAll(double* y, const double* x, const double* w, const double* packed, size_t n, size_t c, size_t oc,
              bool parallel) {
  const hn::ScalableTag<double> d;
  const size_t P = PanelWidth(), panels = oc / P;
  constexpr size_t kRowBlock = 48;  // a multiple of both row tiles (6 and 8)
  const size_t blocks = (n + kRowBlock - 1) / kRowBlock;
  for_each_index(blocks, parallel, [&](size_t b) {
    const size_t i0 = b * kRowBlock, i1 = std::min(n, i0 + kRowBlock);
    DenseRows(d, y, x, packed, i0, i1, panels, c, oc);
    for (size_t i = i0; i < i1; ++i)  // the columns past the last whole tile, one by one
      for (size_t j = panels * P; j < oc; ++j) {
        double s = 0;
        for (size_t k = 0; k < c; ++k) s = s + x[i * c + k] * w[k * oc + j];
        y[i * oc + j] = s;
      }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(PanelWidth);
HWY_EXPORT(PackPanels);
HWY_EXPORT(DenseAll);

DenseF64Weights::DenseF64Weights(std::vector<double> weights, size_t rows, size_t cols)
    : w(std::move(weights)), c(rows), oc(cols), panel_width(HWY_DYNAMIC_DISPATCH(PanelWidth)()) {
  panels.resize(oc / panel_width * panel_width * c);
  HWY_DYNAMIC_DISPATCH(PackPanels)(panels.data(), w.data(), c, oc, false);
}

namespace {

bool worth_team(size_t n, size_t c, size_t oc) { return worth_threads_products(n * c * oc) && n > 64; }

// The product with w's panels laid out for this call.
void dense_packing_here(double* y, const double* x, const double* w, size_t n, size_t c, size_t oc) {
  const bool parallel = worth_team(n, c, oc);
  const size_t P = HWY_DYNAMIC_DISPATCH(PanelWidth)();
  std::vector<double> panels(oc / P * P * c);
  HWY_DYNAMIC_DISPATCH(PackPanels)(panels.data(), w, c, oc, parallel);
  HWY_DYNAMIC_DISPATCH(DenseAll)(y, x, w, panels.data(), n, c, oc, parallel);
}

}  // namespace

void dense_f64(double* y, const double* x, const DenseF64Weights& w, size_t n) {
  if (HWY_DYNAMIC_DISPATCH(PanelWidth)() != w.panel_width) return dense_packing_here(y, x, w.w.data(), n, w.c, w.oc);
  HWY_DYNAMIC_DISPATCH(DenseAll)(y, x, w.w.data(), w.panels.data(), n, w.c, w.oc, worth_team(n, w.c, w.oc));
}

void dense_f64(double* y, const double* x, const double* w, size_t n, size_t c, size_t oc) {
  dense_packing_here(y, x, w, n, c, oc);
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
