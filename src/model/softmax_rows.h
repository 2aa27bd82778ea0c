// The row work of a softmax (attention's probabilities, cross-entropy's) and of its backward, kRows
// rows at a time. A row's max, its sum of exps and its backward's dot product are each a chain of
// dependent steps in index order (the definition; reordering a float sum changes its bits), each
// step waiting on the one before. Rows side by side take their steps together, each in its own
// order, so the chains of different rows overlap: the same bits, several times faster. The exps
// themselves are independent and go through arith/exp_fp32.h a vector at a time.
//
// Rows are stored at a stride ld; row r of a group has len[r] >= 1 elements (causal rows differ).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "arith/exp_fp32.h"

namespace drift {

constexpr size_t kSoftmaxRows = 8;

// out[i] = exp(in[i]), i < n (in == out allowed): drift's exp_fp32 for float (glibc's expf
// algorithm, the same bits on every CPU), std::exp for double (the gradient checks).
template <typename T>
void exp_span(const T* in, T* out, size_t n) {
  if constexpr (std::is_same_v<T, float>)
    exp_fp32_span(in, out, n);
  else
    for (size_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
}

// For kRows rows of `in` (stride ld_in): mx[r] = the row's maximum, as the loop
// `m = row[0]; for j >= 1: m = std::max(m, row[j])` finds it (NaNs after the first element are
// passed over, a NaN first element is kept); out_r[j] = exp(in_r[j] - mx[r]); sum[r] = the out_r[j]
// added in index order, from 0. in and out may be the same rows (ld_in == ld_out).
template <size_t kRows, typename T>
void exp_minus_max_rows(const T* in, size_t ld_in, T* out, size_t ld_out, const size_t* len, T* mx, T* sum) {
  const size_t common = *std::min_element(len, len + kRows);
  T m[kRows], s[kRows] = {};
  for (size_t r = 0; r < kRows; ++r) m[r] = in[r * ld_in];
  for (size_t j = 1; j < common; ++j)
    for (size_t r = 0; r < kRows; ++r) m[r] = std::max(m[r], in[r * ld_in + j]);
  for (size_t r = 0; r < kRows; ++r) {
    const T* x = in + r * ld_in;
    T* y = out + r * ld_out;
    for (size_t j = std::max<size_t>(common, 1); j < len[r]; ++j) m[r] = std::max(m[r], x[j]);
    for (size_t j = 0; j < len[r]; ++j) y[j] = x[j] - m[r];
    exp_span(y, y, len[r]);
  }
  for (size_t j = 0; j < common; ++j)
    for (size_t r = 0; r < kRows; ++r) s[r] += out[r * ld_out + j];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t j = common; j < len[r]; ++j) s[r] += out[r * ld_out + j];
    mx[r] = m[r];
    sum[r] = s[r];
  }
}

// dot[r] = sum over j < len[r] of a_r[j] * b_r[j], each product rounded, added in index order from 0.
template <size_t kRows, typename T>
void dot_rows(const T* a, size_t lda, const T* b, size_t ldb, const size_t* len, T* dot) {
  const size_t common = *std::min_element(len, len + kRows);
  T s[kRows] = {};
  for (size_t j = 0; j < common; ++j)
    for (size_t r = 0; r < kRows; ++r) s[r] += a[r * lda + j] * b[r * ldb + j];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t j = common; j < len[r]; ++j) s[r] += a[r * lda + j] * b[r * ldb + j];
    dot[r] = s[r];
  }
}

// fn(i0, rows) over [0, n) in groups of kSoftmaxRows rows, and the last group's rows one by one
// (fn gets rows == kSoftmaxRows or rows == 1): kernels take their row count as a template argument.
template <typename Fn>
void for_each_row_group(size_t n, Fn fn) {
  size_t i = 0;
  for (; i + kSoftmaxRows <= n; i += kSoftmaxRows) fn(i, std::integral_constant<size_t, kSoftmaxRows>());
  for (; i < n; ++i) fn(i, std::integral_constant<size_t, 1>());
}

}  // namespace drift
