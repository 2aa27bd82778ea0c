#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/dense_f64.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <utility>
#include <vector>

#if HWY_ARCH_X86
#include <cpuid.h>
#endif

#include "arith/dense_f64.h"
#include "arith/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows [i0, i0 + R) x NP panels from column j, in vectors of dv (V of them a panel): R NP V
// accumulators in registers, k ascending, each step acc = acc + x*w as a multiply and then an add
// (Mul/Add: two roundings, as the scalar loop). A panel holds w's columns [j, j + P) as c rows of P =
// V * Lanes(dv) contiguous doubles, and the next panel, columns [j + P, j + 2P), starts c * P
// doubles after it.
template <size_t R, size_t NP, size_t V, class DV>
HWY_INLINE void DenseTile(DV dv, double* y, const double* x, const double* panel, size_t i0, size_t j, size_t c,
                          size_t oc) {
  const size_t L = hn::Lanes(dv), P = V * L;
  hn::Vec<DV> acc[R][NP * V];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NP * V; ++v) acc[r][v] = hn::Zero(dv);
  for (size_t k = 0; k < c; ++k) {
    hn::Vec<DV> w[NP * V];
    for (size_t p = 0; p < NP; ++p)
      for (size_t v = 0; v < V; ++v) w[p * V + v] = hn::LoadU(dv, panel + p * c * P + k * P + v * L);
    for (size_t r = 0; r < R; ++r) {
      const auto xv = hn::Set(dv, x[(i0 + r) * c + k]);
      for (size_t v = 0; v < NP * V; ++v) acc[r][v] = hn::Add(acc[r][v], hn::Mul(xv, w[v]));
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NP * V; ++v) hn::StoreU(acc[r][v], dv, y + (i0 + r) * oc + j + v * L);
}

// Rows [i0, i1) of NP panels from `panel` (column j): tiles of R rows, then at most one of R / 2,
// then single rows.
template <size_t R, size_t NP, size_t V, class DV>
HWY_INLINE void DenseTilesDown(DV dv, double* y, const double* x, const double* panel, size_t i0, size_t i1,
                               size_t j, size_t c, size_t oc) {
  size_t i = i0;
  for (; i + R <= i1; i += R) DenseTile<R, NP, V>(dv, y, x, panel, i, j, c, oc);
  if constexpr (R > 1) {
    if (i + R / 2 <= i1) {
      DenseTile<R / 2, NP, V>(dv, y, x, panel, i, j, c, oc);
      i += R / 2;
    }
  }
  for (; i < i1; ++i) DenseTile<1, NP, V>(dv, y, x, panel, i, j, c, oc);
}

// The tiles of rows [i0, i1) over the `panels` whole panels of 2 vectors of d (panel p, columns from
// j = p * 2L, starting at packed + p * c * 2L), in the form the CPU runs fastest (the same operations
// for every output in each):
//   * AVX-512 in full vectors: panels in pairs under 6 rows (24 accumulators), so that each x
//     broadcast serves four vectors of w rather than two (the broadcasts had taken issue slots from
//     the multiplies and adds: on Zen 4 one core ran 18.4 G multiply-adds a second with 8 rows x one
//     panel, 23.5 G with 6 rows x two, in a standalone loop); an odd last panel as below.
//   * AVX-512 in half vectors (`half`, where the CPU executes a 512-bit operation as two 256-bit
//     halves anyway: cpu_splits_avx512): 4 rows x one panel of 4 half vectors, 16 accumulators (on
//     one Zen 4 core, through the library: 20.8-21.9 G in full vectors, 22.6-24.5 G in half ones,
//     against a peak of 26 G).
//   * One panel at a time elsewhere: 8 rows (16 accumulators) where there are 32 vector registers;
//     the other x86 targets have 16, which 8 rows overfill: 6 rows there (AVX2 on a Zen 4 core,
//     through the library: 15.6-16.4 G a second with 8 rows, 25.4 G with 6).
template <class D>
HWY_INLINE void DenseRows(D d, bool half, double* y, const double* x, const double* packed, size_t i0, size_t i1,
                          size_t panels, size_t c, size_t oc) {
  const size_t P = 2 * hn::Lanes(d);
  size_t p = 0;
#if HWY_TARGET <= HWY_AVX3
  if (half) {
    for (; p < panels; ++p) DenseTilesDown<4, 1, 4>(hn::Half<D>(), y, x, packed + p * c * P, i0, i1, p * P, c, oc);
    return;
  }
  for (; p + 2 <= panels; p += 2) DenseTilesDown<6, 2, 2>(d, y, x, packed + p * c * P, i0, i1, p * P, c, oc);
#else
  (void)half;
#endif
  constexpr size_t kRows = (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) ? 6 : 8;
  for (; p < panels; ++p) DenseTilesDown<kRows, 1, 2>(d, y, x, packed + p * c * P, i0, i1, p * P, c, oc);
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
              bool parallel, bool half) {
  const hn::ScalableTag<double> d;
  const size_t P = PanelWidth(), panels = oc / P;
  constexpr size_t kRowBlock = 48;  // a multiple of every row tile (4, 6 and 8)
  const size_t blocks = (n + kRowBlock - 1) / kRowBlock;
  for_each_index(blocks, parallel, [&](size_t b) {
    const size_t i0 = b * kRowBlock, i1 = std::min(n, i0 + kRowBlock);
    DenseRows(d, half, y, x, packed, i0, i1, panels, c, oc);
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

// Whether AVX-512 runs faster in half vectors here: AMD's family 0x19 (Zen 3 and Zen 4; of them only
// Zen 4 has AVX-512) executes each 512-bit operation as two 256-bit halves. Zen 5 (0x1a) and Intel's
// AVX-512 cores have whole 512-bit units, where half vectors would halve the kernel's rate.
bool cpu_splits_avx512() {
#if HWY_ARCH_X86
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "AuthenticAMD"
  if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned base = (eax >> 8) & 0xf, family = base == 0xf ? base + ((eax >> 20) & 0xff) : base;
  return family == 0x19;
#else
  return false;
#endif
}

int avx512_form_for_test = -1;  // dense_f64_set_avx512_form_for_test

bool half_vectors() {
  static const bool splits = cpu_splits_avx512();
  return avx512_form_for_test < 0 ? splits : avx512_form_for_test == 1;
}

// The product with w's panels laid out for this call.
void dense_packing_here(double* y, const double* x, const double* w, size_t n, size_t c, size_t oc) {
  const bool parallel = worth_team(n, c, oc);
  const size_t P = HWY_DYNAMIC_DISPATCH(PanelWidth)();
  std::vector<double> panels(oc / P * P * c);
  HWY_DYNAMIC_DISPATCH(PackPanels)(panels.data(), w, c, oc, parallel);
  HWY_DYNAMIC_DISPATCH(DenseAll)(y, x, w, panels.data(), n, c, oc, parallel, half_vectors());
}

}  // namespace

void dense_f64(double* y, const double* x, const DenseF64Weights& w, size_t n) {
  if (HWY_DYNAMIC_DISPATCH(PanelWidth)() != w.panel_width) return dense_packing_here(y, x, w.w.data(), n, w.c, w.oc);
  HWY_DYNAMIC_DISPATCH(DenseAll)(y, x, w.w.data(), w.panels.data(), n, w.c, w.oc, worth_team(n, w.c, w.oc),
                                 half_vectors());
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

void dense_f64_set_avx512_form_for_test(int form) { avx512_form_for_test = form; }

}  // namespace drift
#endif  // HWY_ONCE
