// The softmax row kernels (src/model/softmax_rows.h) and cross-entropy against the one-row loops
// they replace, written out here as the definition: the max by std::max in index order, each exp
// (exp_fp32, or std::exp for double), the sum and the dot product added in index order from 0.
// Groups of kSoftmaxRows rows take their chains' steps together; the bits must be the loops' bits,
// for causal rows (each one longer than the last), for a last group of fewer rows, and for rows
// holding NaN, infinities, signed zeros and values whose exp underflows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "arith/exp_fp32.h"
#include "arith/random.h"
#include "model/layers.h"
#include "model/softmax_rows.h"

namespace drift::test_softmax_rows {
namespace {

template <typename T>
T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return exp_fp32(x);
  else
    return std::exp(x);
}

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Values spread over [-40, 40] from a fixed stream, with awkward ones mixed in at fixed places.
template <typename T>
std::vector<T> test_rows(size_t n, size_t ld, uint64_t seed, bool awkward) {
  std::vector<T> x(n * ld);
  uint64_t s = seed;
  for (T& v : x) v = static_cast<T>((static_cast<double>(splitmix64(s++) >> 11) * 0x1p-53 - 0.5) * 80.0);
  if (awkward && n >= 6 && ld >= 5) {
    const T inf = std::numeric_limits<T>::infinity();
    x[0 * ld + 3] = std::numeric_limits<T>::quiet_NaN();  // NaN after the first element: passed over by the max
    x[1 * ld + 0] = std::numeric_limits<T>::quiet_NaN();  // NaN first: the max is NaN
    x[2 * ld + 1] = inf;
    x[3 * ld + 2] = -inf;
    x[4 * ld + 0] = T(-0.0);  // a row whose largest value is zero, both signs
    for (size_t j = 1; j < ld; ++j) x[4 * ld + j] = j % 2 ? T(0.0) : -T(200);
    x[5 * ld + 4] = T(-300);  // exp underflows to 0
  }
  return x;
}

template <typename T>
void check_exp_minus_max(size_t n, size_t ld, bool causal) {
  const std::vector<T> in = test_rows<T>(n, ld, 17 + n + (causal ? 100 : 0), true);
  std::vector<T> out(n * ld, T(7)), mx(n), sum(n);
  std::vector<size_t> len(n);
  for (size_t i = 0; i < n; ++i) len[i] = causal ? std::min(ld, i + 1) : ld;
  for_each_row_group(n, [&](size_t i0, auto rows) {
    constexpr size_t kRows = decltype(rows)::value;
    exp_minus_max_rows<kRows>(in.data() + i0 * ld, ld, out.data() + i0 * ld, ld, len.data() + i0, mx.data() + i0,
                              sum.data() + i0);
  });
  // In place as well: attention's rows are their own input.
  std::vector<T> inplace = in, mx2(n), sum2(n);
  for_each_row_group(n, [&](size_t i0, auto rows) {
    constexpr size_t kRows = decltype(rows)::value;
    exp_minus_max_rows<kRows>(inplace.data() + i0 * ld, ld, inplace.data() + i0 * ld, ld, len.data() + i0,
                              mx2.data() + i0, sum2.data() + i0);
  });
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const T* x = in.data() + i * ld;
    T m = x[0];
    for (size_t j = 1; j < len[i]; ++j) m = std::max(m, x[j]);
    T s = 0;
    for (size_t j = 0; j < len[i]; ++j) {
      const T e = exp_of(x[j] - m);
      s += e;
      if ((!same_bits(out[i * ld + j], e) || !same_bits(inplace[i * ld + j], e)) && bad++ < 5)
        FAIL_CHECK("row " << i << " j " << j << ": exp " << out[i * ld + j] << " / " << inplace[i * ld + j] << ", want " << e);
    }
    for (size_t j = len[i]; j < ld; ++j)
      if (!same_bits(out[i * ld + j], T(7)) && bad++ < 5) FAIL_CHECK("row " << i << " j " << j << " written past len");
    if ((!same_bits(mx[i], m) || !same_bits(mx2[i], m)) && bad++ < 5) FAIL_CHECK("row " << i << ": max " << mx[i] << ", want " << m);
    if ((!same_bits(sum[i], s) || !same_bits(sum2[i], s)) && bad++ < 5) FAIL_CHECK("row " << i << ": sum " << sum[i] << ", want " << s);
  }
  CHECK(bad == 0);
}

template <typename T>
void check_dot(size_t n, size_t ld, bool causal) {
  const std::vector<T> a = test_rows<T>(n, ld, 5 + n, true), b = test_rows<T>(n, ld, 900 + n, false);
  std::vector<T> dot(n);
  std::vector<size_t> len(n);
  for (size_t i = 0; i < n; ++i) len[i] = causal ? std::min(ld, i + 1) : ld;
  for_each_row_group(n, [&](size_t i0, auto rows) {
    constexpr size_t kRows = decltype(rows)::value;
    dot_rows<kRows>(a.data() + i0 * ld, ld, b.data() + i0 * ld, ld, len.data() + i0, dot.data() + i0);
  });
  for (size_t i = 0; i < n; ++i) {
    T s = 0;
    for (size_t j = 0; j < len[i]; ++j) s += a[i * ld + j] * b[i * ld + j];
    INFO("row " << i);
    CHECK(same_bits(dot[i], s));
  }
}

}  // namespace

TEST_CASE("exp_minus_max_rows: the one-row loops' bits, full and causal rows, a short last group, in place") {
  for (size_t n : {1u, 7u, 8u, 13u, 64u})
    for (size_t ld : {5u, 9u, 64u, 256u}) {
      INFO("n " << n << " ld " << ld);
      check_exp_minus_max<float>(n, ld, false);
      check_exp_minus_max<float>(n, ld, true);
      check_exp_minus_max<double>(n, ld, true);
    }
}

TEST_CASE("dot_rows: the one-row loop's bits") {
  for (size_t n : {1u, 8u, 13u, 64u})
    for (size_t ld : {5u, 64u}) {
      INFO("n " << n << " ld " << ld);
      check_dot<float>(n, ld, true);
      check_dot<float>(n, ld, false);
      check_dot<double>(n, ld, true);
    }
}

// crossentropy_forward against the loop it was: per row the max, p = exp(x - max), the sum, p / sum
// by one reciprocal, the loss log(sum) - (x[target] - max); the mean of the losses in double.
TEST_CASE("crossentropy_forward: the one-row loop's bits") {
  for (size_t n : {3u, 8u, 21u})
    for (size_t v : {7u, 256u}) {
      INFO("n " << n << " v " << v);
      const std::vector<float> logits = test_rows<float>(n, v, 40 + n + v, false);
      std::vector<int32_t> targets(n);
      for (size_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 7 + 3) % v);
      std::vector<float> probs(n * v), losses(n);
      const double mean = crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), n, v);
      double total = 0;
      int bad = 0;
      for (size_t i = 0; i < n; ++i) {
        const float* x = logits.data() + i * v;
        float m = x[0];
        for (size_t j = 1; j < v; ++j) m = std::max(m, x[j]);
        std::vector<float> p(v);
        float s = 0;
        for (size_t j = 0; j < v; ++j) {
          p[j] = exp_fp32(x[j] - m);
          s += p[j];
        }
        const float inv = 1.0f / s;
        for (size_t j = 0; j < v; ++j)
          if (!same_bits(probs[i * v + j], p[j] * inv) && bad++ < 5) FAIL_CHECK("row " << i << " j " << j);
        const float loss = std::log(s) - (x[targets[i]] - m);
        if (!same_bits(losses[i], loss) && bad++ < 5) FAIL_CHECK("row " << i << " loss");
        total += static_cast<double>(loss);
      }
      CHECK(bad == 0);
      CHECK(same_bits(mean, total / static_cast<double>(n)));
    }
}

}  // namespace drift::test_softmax_rows
