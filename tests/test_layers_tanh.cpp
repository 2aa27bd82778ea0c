// The layers' tanh: float goes through drift's tanh_fp32 (arith/tanh_fp32.h), double through
// drift's tanh_f64 (arith/tanh_f64.h), and gelu's blocks of u (256 at a time) give every element
// the value of the one-element statement. Lengths cross block boundaries and end in a ragged block;
// 9000 crosses the 4096-element chunks a team splits tanh into.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "arith/tanh_f64.h"
#include "arith/tanh_fp32.h"
#include "model/layers.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_layers_tanh {

using drift::testing::same_bits;

using namespace drift;

namespace {

template <typename T>
std::vector<T> inputs(size_t n) {
  std::vector<T> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<T>((static_cast<double>(i) - 0.5 * static_cast<double>(n)) * 0.0137);
  return x;
}

// GPT-2's gelu, one element, with `th` as tanh: the statement gelu_forward/gelu_backward implement.
template <typename T, typename Tanh>
T gelu_one(T x, Tanh th) {
  const T s = static_cast<T>(0.7978845608028654);
  return T(0.5) * x * (T(1) + th(s * (x + T(0.044715) * x * x * x)));
}
template <typename T, typename Tanh>
T gelu_grad_one(T dout, T x, Tanh th) {
  const T s = static_cast<T>(0.7978845608028654);
  const T t = th(s * (x + T(0.044715) * x * x * x));
  const T du = s * (T(1) + T(3) * T(0.044715) * x * x);
  return dout * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
}

template <typename T, typename Tanh>
void check_layers(size_t n, Tanh th) {
  const std::vector<T> x = inputs<T>(n);
  std::vector<T> dout(n);
  for (size_t i = 0; i < n; ++i) dout[i] = static_cast<T>(1.0 + 0.001 * static_cast<double>(i % 17));
  std::vector<T> out(n), g(n), d(n);
  tanh_forward(out.data(), x.data(), n);
  gelu_forward(g.data(), x.data(), n);
  gelu_backward(d.data(), dout.data(), x.data(), n);
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool ok = same_bits(out[i], th(x[i])) && same_bits(g[i], gelu_one(x[i], th)) &&
                    same_bits(d[i], gelu_grad_one(dout[i], x[i], th));
    if (!ok && bad++ < 5) FAIL_CHECK("n " << n << " element " << i << " x " << static_cast<double>(x[i]));
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("float layers use tanh_fp32, element for element") {
  for (size_t n : {1, 255, 256, 257, 1000}) check_layers<float>(n, [](float u) { return tanh_fp32(u); });
}

TEST_CASE("double layers use tanh_f64, element for element") {
  for (size_t n : {1, 255, 256, 257, 1000, 9000}) check_layers<double>(n, [](double u) { return tanh_f64(u); });
}

}  // namespace test_layers_tanh
