// Shared by the quantizer tests (host proof of the CUDA steps, the float entry, the GPU tests): the
// inputs a quantizer meets, and bit-for-bit comparison of what two quantizations produced.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "arith/catalogue.h"
#include "arith/quantize.h"
#include "arith/random.h"
#include "same_bits.h"

namespace drift::testing {

// Values of every kind a quantizer meets: zeros of both signs, tiny, subnormal, huge, the e4m3 top
// and just past it; with `specials`, some NaN and inf (each such block reads as NaN under block
// scaling, so the rest stay clean). `float_grid`: every value a float (the float entry's inputs).
inline std::vector<double> quantizer_inputs(size_t n, uint64_t seed, bool specials, bool float_grid) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 11, 2 * i), r1 = random_u32(seed, 11, 2 * i + 1);
    double x = (static_cast<double>(r0) / 4294967296.0 - 0.5) * 8.0 * static_cast<double>(uint64_t{1} << (r1 % 7));
    switch ((r1 >> 8) % 32) {
      case 0: x = 0.0; break;
      case 1: x = -0.0; break;
      case 2: x *= 1e-30; break;                          // far below every small format's range
      case 3: x *= float_grid ? 1e-40 : 1e-310; break;    // subnormal float / double
      case 4: x *= 1e30; break;                           // huge: clips unless scaled
      case 5: x = float_grid ? x * 1e37 : x * 1e300; break;
      case 6: x = (r1 >> 20) & 1 ? 448.0 : 464.0; break;  // the e4m3 top and just past it
      case 7: x *= 1e-7; break;
      case 8:
        if (specials && (r1 >> 13) % 16 == 0) x = ((r1 >> 17) % 3 == 0) ? quiet_nan() : infinity((r1 >> 18) & 1);
        break;
      default: break;
    }
    v[i] = float_grid ? static_cast<double>(static_cast<float>(x)) : x;
  }
  return v;
}

// A rows x k operand as callers store it: k-contiguous rows, or transposed (k rows of `rows`), each
// stored row padded by `pad` unused values (and one past the end), filled by quantizer_inputs.
struct StoredOperand {
  std::vector<double> data;
  size_t ld = 0;
  bool transposed = false;
  // The operand read through strides, from data or from a same-size copy of it in another type.
  template <typename T>
  StridedInputOf<T> view(const std::vector<T>& values) const {
    return transposed ? StridedInputOf<T>{values.data(), 1, ld} : StridedInputOf<T>{values.data(), ld, 1};
  }
  StridedInput view() const { return view(data); }
};
inline StoredOperand stored_operand(size_t rows, size_t k, bool transposed, size_t pad, uint64_t seed, bool specials,
                                    bool float_grid) {
  const size_t ld = (transposed ? rows : k) + pad;
  return {quantizer_inputs((transposed ? k : rows) * ld + 1, seed, specials, float_grid), ld, transposed};
}

inline Quantizer make_quantizer(const char* format, ScaleKind kind, int block = 32) {
  Quantizer q;
  q.format = *find_format(format);
  q.scaling.kind = kind;
  q.scaling.block = block;
  return q;
}

// Every field of the telemetry, the scale-exponent histogram bin by bin.
inline void check_same_stats(const QuantStats& got, const QuantStats& want) {
  CHECK(got.elements == want.elements);
  CHECK(got.clipped == want.clipped);
  CHECK(got.flushed == want.flushed);
  CHECK(got.subnormal == want.subnormal);
  CHECK(got.nonfinite == want.nonfinite);
  CHECK(same_bits(got.amax, want.amax));
  CHECK(got.scale_count == want.scale_count);
  CHECK(got.scale_exp_min == want.scale_exp_min);
  CHECK(got.scale_exp_max == want.scale_exp_max);
  CHECK(same_bits(got.scale_exp_sum, want.scale_exp_sum));
  size_t bad_bins = 0;
  for (int e = -QuantStats::kScaleExpOffset; e <= QuantStats::kScaleExpOffset; ++e)
    bad_bins += got.scale_exp_hist.count(e) != want.scale_exp_hist.count(e);
  CHECK(bad_bins == 0);
}

// Values, block scales, tensor scale and stats, bit for bit (the storage, q or qf, may differ).
inline void check_same_operand(const QuantizedOperand& got, const QuantizedOperand& want) {
  REQUIRE(got.rows == want.rows);
  REQUIRE(got.k == want.k);
  size_t bad = 0;
  for (size_t i = 0; i < want.rows * want.k; ++i) bad += !same_bits(got.value(i), want.value(i));
  CHECK(bad == 0);
  CHECK(got.block_k == want.block_k);
  CHECK(got.blocks_per_row == want.blocks_per_row);
  REQUIRE(got.block_scale.size() == want.block_scale.size());
  size_t bad_scales = 0;
  for (size_t i = 0; i < want.block_scale.size(); ++i) bad_scales += !same_bits(got.block_scale[i], want.block_scale[i]);
  CHECK(bad_scales == 0);
  CHECK(same_bits(got.tensor_scale, want.tensor_scale));
  check_same_stats(got.stats, want.stats);
}

inline void check_same_state(const DelayedState& got, const DelayedState& want) {
  CHECK(got.initialised == want.initialised);
  CHECK(same_bits(got.scale, want.scale));
  REQUIRE(got.history.size() == want.history.size());
  for (size_t i = 0; i < want.history.size(); ++i) CHECK(same_bits(got.history[i], want.history[i]));
}

}  // namespace drift::testing
