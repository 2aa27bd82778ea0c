// LayerNorm's row sums: the forward's mean and reciprocal standard deviation of each row, and the
// backward's two row means. Each is a chain of dependent adds along the row in index order (the
// definition: reordering a float sum changes its bits), so a row cannot be split across SIMD lanes.
// Rows can be put side by side instead: the templates below take kRows rows' steps together in
// scalar code (the statement, for float and double), and the float spans take 16 rows at a time on
// AVX-512, one row per lane, after transposing 16 x 16 blocks in registers. Every lane takes its
// row's steps in the statement's order with the same IEEE float operations, so the bits are the
// statement's on every target; the scalar form pays one instruction per element and operation,
// the lanes one per 16 rows (a LayerNorm of the attention model's 128-wide rows spent most of its
// time in these sums).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// The forward's statistics of kRows rows of x (row stride c), each as one row's loop computes them:
// m = x[0] + x[1] + ... (from 0, in index order), mean = m / c; v = the (x[j] - mean)^2 added the
// same way, rstd = 1 / sqrt(v / c + eps), eps = 1e-5 in T.
template <size_t kRows, typename T>
void layernorm_stats_rows(const T* x, size_t c, T* mean, T* rstd) {
  const T eps = static_cast<T>(1e-5);
  T m[kRows] = {}, v[kRows] = {};
  for (size_t j = 0; j < c; ++j)
    for (size_t r = 0; r < kRows; ++r) m[r] += x[r * c + j];
  for (size_t r = 0; r < kRows; ++r) m[r] /= static_cast<T>(c);
  for (size_t j = 0; j < c; ++j)
    for (size_t r = 0; r < kRows; ++r) {
      const T d = x[r * c + j] - m[r];
      v[r] += d * d;
    }
  for (size_t r = 0; r < kRows; ++r) {
    v[r] /= static_cast<T>(c);
    mean[r] = m[r];
    rstd[r] = T(1) / std::sqrt(v[r] + eps);
  }
}

// The backward's two row means of kRows rows (row stride c), each added in its row's index order:
// of dnorm = w[j] * dy[j], and of dnorm * norm, norm = (x[j] - mean) * rstd.
template <size_t kRows, typename T>
void layernorm_backward_means_rows(const T* x, const T* dy, const T* w, const T* mean, const T* rstd, size_t c,
                                   T* dnorm_mean, T* dnorm_norm_mean) {
  T dm[kRows] = {}, dnm[kRows] = {};
  for (size_t j = 0; j < c; ++j)
    for (size_t r = 0; r < kRows; ++r) {
      const T norm = (x[r * c + j] - mean[r]) * rstd[r];
      const T dnorm = w[j] * dy[r * c + j];
      dm[r] += dnorm;
      dnm[r] += dnorm * norm;
    }
  for (size_t r = 0; r < kRows; ++r) {
    dnorm_mean[r] = dm[r] / static_cast<T>(c);
    dnorm_norm_mean[r] = dnm[r] / static_cast<T>(c);
  }
}

// The statements for rows [0, n) in scalar code: 8 rows side by side (their chains overlap), the
// rest one by one. The double models run these; float spans below fall back to them off AVX-512.
template <typename T>
void layernorm_stats_scalar(const T* x, size_t n, size_t c, T* mean, T* rstd) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) layernorm_stats_rows<8>(x + i * c, c, mean + i, rstd + i);
  for (; i < n; ++i) layernorm_stats_rows<1>(x + i * c, c, mean + i, rstd + i);
}

template <typename T>
void layernorm_backward_means_scalar(const T* x, const T* dy, const T* w, const T* mean, const T* rstd, size_t n,
                                     size_t c, T* dnorm_mean, T* dnorm_norm_mean) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    layernorm_backward_means_rows<8>(x + i * c, dy + i * c, w, mean + i, rstd + i, c, dnorm_mean + i,
                                     dnorm_norm_mean + i);
  for (; i < n; ++i)
    layernorm_backward_means_rows<1>(x + i * c, dy + i * c, w, mean + i, rstd + i, c, dnorm_mean + i,
                                     dnorm_norm_mean + i);
}

// layernorm_stats_rows for rows [0, n) of x (row stride c), on the best SIMD target of this CPU.
// Single-threaded (callers split rows: each row's results are the same in any split).
void layernorm_stats_floats(const float* x, size_t n, size_t c, float* mean, float* rstd);

// layernorm_backward_means_rows for rows [0, n) of x and dy (row stride c); mean and rstd per row.
void layernorm_backward_means_floats(const float* x, const float* dy, const float* w, const float* mean,
                                     const float* rstd, size_t n, size_t c, float* dnorm_mean,
                                     float* dnorm_norm_mean);

// The targets compiled in that this CPU supports (hwy target bits), for tests.
std::vector<int64_t> layernorm_sums_targets();

}  // namespace drift
