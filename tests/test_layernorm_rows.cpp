// layernorm_forward and layernorm_backward (model/layers.h) take rows in groups whose sums step
// together: each row must still get exactly the bits of the one-row statement of llm.c's layer norm,
// written out below, for every row count (whole groups, a last short group, fewer rows than a
// group), both element types, and values whose sums round at every step.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "arith/random.h"
#include "model/layers.h"
#include "same_bits.h"

namespace test_layernorm_rows {

using namespace drift;
using drift::testing::same_bits;

namespace {

// The statement, one row at a time, each sum in index order.
template <typename T>
void forward_statement(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, size_t n, size_t c) {
  const T eps = static_cast<T>(1e-5);
  for (size_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    T m = 0;
    for (size_t j = 0; j < c; ++j) m += x[j];
    m /= static_cast<T>(c);
    T v = 0;
    for (size_t j = 0; j < c; ++j) v += (x[j] - m) * (x[j] - m);
    v /= static_cast<T>(c);
    const T r = T(1) / std::sqrt(v + eps);
    for (size_t j = 0; j < c; ++j) out[i * c + j] = (x[j] - m) * r * w[j] + b[j];
    mean[i] = m;
    rstd[i] = r;
  }
}

template <typename T>
void backward_statement(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean, const T* rstd,
                        size_t n, size_t c) {
  for (size_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    const T* dy = dout + i * c;
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (size_t j = 0; j < c; ++j) {
      const T norm = (x[j] - mean[i]) * rstd[i];
      const T dnorm = w[j] * dy[j];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<T>(c);
    dnorm_norm_mean /= static_cast<T>(c);
    for (size_t j = 0; j < c; ++j) {
      const T norm = (x[j] - mean[i]) * rstd[i];
      const T dnorm = w[j] * dy[j];
      dinp[i * c + j] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[i];
      db[j] += dy[j];
      dw[j] += norm * dy[j];
    }
  }
}

// Values spread over 2^-12 .. 2^12 with both signs and an offset per row, so that every sum rounds.
template <typename T>
std::vector<T> values(size_t len, uint64_t seed, double offset) {
  std::vector<T> v(len);
  for (size_t i = 0; i < len; ++i) {
    const uint32_t r = random_u32(seed, 3, i);
    const double u = (static_cast<double>(r >> 8) / 16777216.0 - 0.5) * std::ldexp(1.0, static_cast<int>(r % 25) - 12);
    v[i] = static_cast<T>(u + offset);
  }
  return v;
}

template <typename T>
void check_rows(size_t n, size_t c) {
  CAPTURE(n);
  CAPTURE(c);
  const auto x = values<T>(n * c, 11 + n, 3.0), w = values<T>(c, 12, 1.0), b = values<T>(c, 13, 0.0);
  const auto dy = values<T>(n * c, 14 + n, 0.0), dinp0 = values<T>(n * c, 15, 0.0);
  std::vector<T> out(n * c), mean(n), rstd(n), out_s(n * c), mean_s(n), rstd_s(n);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
  forward_statement(out_s.data(), mean_s.data(), rstd_s.data(), x.data(), w.data(), b.data(), n, c);
  CHECK(same_bits(out, out_s));
  CHECK(same_bits(mean, mean_s));
  CHECK(same_bits(rstd, rstd_s));
  std::vector<T> dinp = dinp0, dw(c, T(0.5)), db(c, T(-0.25)), dinp_s = dinp0, dw_s = dw, db_s = db;
  layernorm_backward(dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), n, c);
  backward_statement(dinp_s.data(), dw_s.data(), db_s.data(), dy.data(), x.data(), w.data(), mean_s.data(),
                     rstd_s.data(), n, c);
  CHECK(same_bits(dinp, dinp_s));
  CHECK(same_bits(dw, dw_s));
  CHECK(same_bits(db, db_s));
}

}  // namespace

TEST_CASE("layer norm in row groups == the one-row statement, bit for bit (float and double)") {
  for (size_t n : {1, 3, 7, 8, 9, 15, 16, 17, 23, 33, 64, 1030})
    for (size_t c : {1, 5, 64, 128, 129}) {
      check_rows<float>(n, c);
      check_rows<double>(n, c);
    }
}

}  // namespace test_layernorm_rows
