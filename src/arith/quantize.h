// Operand quantizers: a format, a rounding, and a scaling scheme that decides the scale each
// element is divided by before it is rounded. The result is values on the element grid plus the
// scales that bring them back (what the matmul's outer sum multiplies in).
//
// Layout: an operand is `rows x k` with k contiguous (the matmul's reduction axis). Blocks run
// along k; 2-D blocks cover `block x block` squares of (row, k), which makes a weight's
// quantization identical whether it is used as W or W^T.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "arith/quantize_element.h"
#include "arith/round.h"

namespace drift {

// ScaleKind and its traits live in arith/scale_kinds.h, ExpRule in arith/quantize_element.h (the
// host/device steps use them).

enum class AmaxAlgo : uint8_t { max, most_recent };

struct Scaling {
  ScaleKind kind = ScaleKind::none;
  int block = 32;          // block: elements per block along k (MX 32); tile: 128; nvfp4: 16
  bool two_d = false;      // block x block squares instead of 1 x block runs
  ExpRule rule = ExpRule::floor;  // block: shared-exponent rule
  int offset = 0;          // block: added to the shared exponent ("bump by one")
  int margin = 0;          // tensor/delayed: scale divided by 2^margin
  bool pow2 = false;       // tensor/delayed/tile: scale truncated (tensor) / rounded up (tile) to a power of two
  double amax_floor = 1e-12;  // tensor/delayed/tile: amax is at least this (no infinite scale)
  int history = 16;        // delayed: amax history length
  AmaxAlgo algo = AmaxAlgo::max;  // delayed: how the history becomes one amax
  int hadamard = 0;        // 0, 16 or 32: random Hadamard transform along k before quantizing
  uint64_t hadamard_seed = 0;
  MxEmulation emulate;     // block: microxcaling's departures from OCP MX (quantize_element.h; off by default)
};

struct Quantizer {
  Format format;           // element format
  RoundSpec round;         // element rounding (saturate by default: what fp8 recipes use)
  Scaling scaling;
};

// Counts of scale exponents. Stored only over the range of exponents seen (a tensor's scales
// usually span a few binades): every matmul call returns one per operand and the sites merge them,
// so a dense array of every possible exponent would be zeroed, copied and summed on each call.
class ScaleExpHistogram {
 public:
  // n scales with exponent e (inline where e is inside the stored range: once per scale block).
  void add(int e, uint64_t n = 1) {
    if (e >= lo_ && e < lo_ + static_cast<int>(counts_.size())) counts_[static_cast<size_t>(e - lo_)] += n;
    else add_outside(e, n);
  }
  void merge(const ScaleExpHistogram& o);
  uint64_t count(int e) const;                    // 0 outside the stored range
  // fn(e, count) for each exponent with a non-zero count, in increasing order.
  template <typename Fn>
  void for_each(Fn fn) const {
    for (size_t i = 0; i < counts_.size(); ++i)
      if (counts_[i]) fn(lo_ + static_cast<int>(i), counts_[i]);
  }

 private:
  void cover(int lo, int hi);  // grows the stored range to include [lo, hi]
  void add_outside(int e, uint64_t n);
  int lo_ = 0;                 // exponent of counts_[0]
  std::vector<uint64_t> counts_;
};

// What a quantizer did to one tensor: the telemetry every call returns.
struct QuantStats {
  uint64_t elements = 0;
  uint64_t clipped = 0;    // inputs that overflowed: +-inf, or rounded magnitude beyond max_finite (as CastStats)
  uint64_t flushed = 0;    // non-zero inputs that became zero
  uint64_t subnormal = 0;  // non-zero results below the element format's min normal
  uint64_t nonfinite = 0;  // NaN or inf among the inputs
  double amax = 0;         // largest finite |input|
  // Scale exponents (log2 of each block's or the tensor's dequantisation scale, where it is a
  // power of two; floor(log2) otherwise), over blocks with a non-zero finite amax.
  uint64_t scale_count = 0;
  int scale_exp_min = 0, scale_exp_max = 0;
  // A sum of integer exponents (|e| <= 1074): every partial sum is an exact integer in double while
  // fewer than 2^42 scales are added, so any order of adding (threads, merges, the CUDA quantizer's
  // integer sum) gives the same value.
  double scale_exp_sum = 0;
  // The distribution: scale_exp_hist.count(e) scales had exponent e (clamped to
  // [-kScaleExpOffset, kScaleExpOffset]; covers e8m0, e4m3 and fp32 scales).
  static constexpr int kScaleExpOffset = 160;
  ScaleExpHistogram scale_exp_hist;
  void merge(const QuantStats& o);
};

// Amax history of one delayed-scaling site, carried across steps by the caller.
struct DelayedState {
  std::deque<double> history;
  double scale = 1.0;      // multiplier applied before rounding (TE's `scale`)
  bool initialised = false;
};

// A quantized operand: q[r*k + i] on the element grid; dequantised value = q * block_scale * tensor_scale.
// A float input quantized to a format whose grid fits in float (fits_float) keeps its values in
// `qf` instead (`in_float`, q empty): the values are the same, stored in half the bytes, and the
// fast matmul reads them without a conversion. widen() moves them to q for every other reader.
// Only where the caller allowed it (the float matmul entry, for B stored K x N), qf can hold the
// values k-major (`k_major`: element (r, i) at qf[i*rows + r], the input's own order, so that
// neither the quantizer nor the fast kernel's packing transposes it); value() and widen() read
// either order, and to_row_major() makes it the usual one.
struct QuantizedOperand {
  size_t rows = 0, k = 0;
  std::vector<double> q;
  std::vector<float> qf;               // (may be longer than rows * k: reused storage)
  bool in_float = false;
  bool k_major = false;                // (in_float only)
  size_t block_k = 0;                  // k-extent of a scale block (0: no per-block scales)
  size_t blocks_per_row = 0;
  std::vector<double> block_scale;     // rows x blocks_per_row, exact dequantisation multipliers
  double tensor_scale = 1.0;           // applied once to the finished product (alpha)
  QuantStats stats;
  double dequant(size_t r, size_t i) const {
    const double s = block_k ? block_scale[r * blocks_per_row + i / block_k] : 1.0;
    return value(r * k + i) * s * tensor_scale;
  }
  double value(size_t idx) const {
    if (!in_float) return q[idx];
    return static_cast<double>(k_major ? qf[(idx % k) * rows + idx / k] : qf[idx]);
  }
  // Stores the values in q (exactly: every float is a double), row-major; a no-op when they are
  // there already.
  void widen();
  // qf row-major (a transposition when it is k-major), through the caller's scratch.
  void to_row_major(std::vector<float>& scratch);
  // Shape rows x k with no scales and empty stats: where every quantization starts (the value
  // storage is the caller's to set up).
  void reset_unscaled(size_t rows_, size_t k_);
};

// A rows x k operand in memory: element (r, c) at p[r*rs + c*cs] (either layout, no copy needed).
// Elements are double or float (a model's float tensors, read in place); a float is read as the
// double of the same value, so both give the same quantization.
template <typename T>
struct StridedInputOf {
  const T* p;
  size_t rs, cs;
  double at(size_t r, size_t c) const { return p[r * rs + c * cs]; }
};
using StridedInput = StridedInputOf<double>;
using StridedInputF = StridedInputOf<float>;

struct QuantizeWorkspace;  // arith/quantize_workspace.h

// Quantizes x (rows x k, row stride ld, k contiguous). `state` is required for delayed scaling.
// `seed`/`stream` key the random bits of stochastic rounding (element index r*k + i).
QuantizedOperand quantize(const double* x, size_t rows, size_t k, size_t ld, const Quantizer& qz,
                          uint64_t seed, uint64_t stream, DelayedState* state = nullptr);

// The same, into `out`, reusing its storage, with the caller's scratch memory `ws`
// (arith/quantize_workspace.h; null: a fresh one for this call, the same results).
void quantize_into(QuantizedOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
                   uint64_t seed, uint64_t stream, DelayedState* state = nullptr, QuantizeWorkspace* ws = nullptr);
// The same from float input: identical values, scales and stats; the values are left in out.qf
// (out.in_float) when the element format fits in float, else in out.q. With `allow_k_major`, an
// input stored k-major (x.rs == 1) is quantized in its own order and left so (out.k_major) where
// the quantizer allows it: deterministic rounding, no Hadamard transform, no microxcaling element
// step, 1-D blocks whose scaled values are floats and without NaN/inf (else the usual order).
// Without `tally` (a caller that reads none of out.stats' counts on this call), the MX presets'
// one-pass kernels skip their counts and the other block kinds their scale tallies: out.stats may
// then lack clipped, flushed, subnormal, amax and the scale tallies (its non-finite count is kept);
// values and scales are the same.
void quantize_into(QuantizedOperand& out, const StridedInputF& x, size_t rows, size_t k, const Quantizer& qz,
                   uint64_t seed, uint64_t stream, DelayedState* state = nullptr, QuantizeWorkspace* ws = nullptr,
                   bool allow_k_major = false, bool tally = true);

// The random Hadamard transform along k (in place, per consecutive group of n = 16 or 32 along k;
// a trailing partial group is left as is). Signs come from (seed); both operands of a matmul must
// use the same seed so that the transforms cancel in the product.
void hadamard_rows(double* x, size_t rows, size_t k, size_t ld, int n, uint64_t seed);

// The e8m0 exponent an MX block with largest magnitude `amax` (finite, > 0) gets under `rule`,
// before the offset and the clamp to [-127, 127]. Computed from exponent bits, never with log2.
int mx_scale_exponent(double amax, const Format& elem, ExpRule rule);

// The pieces of quantize_into that a quantizer running elsewhere (the CUDA backend) needs to get
// the same results: the host-side arithmetic around the per-element steps of quantize_element.h.
//   tensor_level_multiplier the multiplier of the kind's tensor rule (scale_kinds.h), the one
//                           place that picks a tensor rule's arithmetic: 1 for none, else one of
//                           the next three (current_amax and block_scale_range take the tensor's
//                           amax, counted first; amax_history takes the state)
//   tensor_scale_from_amax  tensor scaling's multiplier (TE current scaling) from the tensor's amax
//   nvfp4_encode_scale      NVFP4's tensor-level encode scale s_enc from the tensor's amax
//   block_scale_spec        the constants block_scale_of needs (blocked kinds; s_enc: a two-level
//                           kind's tensor multiplier, else 1)
//   delayed_scale_for_step  delayed scaling's multiplier this step (initialises the state; throws
//                           std::invalid_argument when state is null)
//   delayed_record_step     delayed scaling after the pass: this step's amax (NaN when the tensor
//                           had a NaN or inf) joins the history and sets the next step's scale
// The dequantisation tensor_scale of tensor/delayed is fp32(1 / multiplier), of nvfp4 fp32(1 / s_enc):
// tensor_dequant_scale.
double tensor_level_multiplier(const Quantizer& qz, double amax, DelayedState* state);
double tensor_scale_from_amax(double amax, const Quantizer& qz);
double nvfp4_encode_scale(double amax, const Quantizer& qz);
BlockScaleSpec block_scale_spec(const Quantizer& qz, double s_enc);
double delayed_scale_for_step(DelayedState* state);
void delayed_record_step(DelayedState& state, const Quantizer& qz, double amax, uint64_t nonfinite);
double tensor_dequant_scale(double multiplier);
// Adds one scale's exponent to st (nothing for a scale that is zero, NaN or inf).
void record_scale(QuantStats& st, double dequant_scale);

// OCP MX's floor rule with no microxcaling departure (the MX presets): plain_e8m0_floor says whether
// block_scale_of takes it under s, and plain_e8m0_exponent gives the clamped e8m0 exponent it gives
// a block of finite float amax (its scale 2^e, its multiplier 2^-e): floor(log2 amax) - emax +
// offset from amax's bits (a subnormal's from its leading one), -127 for an all-zero block. (Once
// per block of 32 in the quantizer's float path: there, block_scale_of's rule switches and double
// unpacking cost more than the block's elements.)
inline bool plain_e8m0_floor(const BlockScaleSpec& s) {
  return s.method == BlockScaleRule::e8m0_exponent && s.rule == ExpRule::floor && s.emulate.scale_bits == 0 &&
         s.emulate.exponent == ExpSource::exact;
}
inline int plain_e8m0_exponent(float amax, const BlockScaleSpec& s) {
  uint32_t u;
  std::memcpy(&u, &amax, sizeof u);
  u &= 0x7fffffffu;
  if (u == 0) return -127;
  const int biased = static_cast<int>(u >> 23);
  const int floor_log2 = biased ? biased - 127 : (31 - __builtin_clz(u)) - 149;
  return std::clamp(floor_log2 - s.emax + s.offset, -127, 127);
}

// Names for parsing/printing.
const char* to_string(ExpRule r);
const char* to_string(ExpSource s);
bool parse_exp_rule(const std::string& s, ExpRule* out);
bool parse_exp_source(const std::string& s, ExpSource* out);

}  // namespace drift
