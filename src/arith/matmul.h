// The matmul engine: C = A*B under a policy of operand quantizers, product rounding, inner and
// outer accumulation and output rounding. The one function every matmul of every model calls.
//
// Definition (DESIGN.md, "The matmul is two-level"):
//   C[i,j] = out( alpha * outer_sum_b( s(i,j,b) * inner_sum_{k in b}( p(a_q[i,k] * b_q[k,j]) ) ) )
// where b runs over K-blocks (the scale block, else the promotion interval), s = fp_outer(sa(i,b)*sb(b,j))
// is the product of the two block scales, alpha = fp_outer(ta*tb) the product of the tensor-level
// dequantisation scales (1 when there are none), p is exact unless a product format is set, and
// every `+` and `*` above is rounded in the format of the sum it belongs to:
//   inner:   acc = inner_fmt(acc + p)                   (in the inner order; or the fused tensor-core model)
//   scaling: t   = outer_fmt(inner_sum * s)             (when an operand has block scales; else t = inner_sum)
//   outer:   acc = outer_fmt(acc + t)                   (in the outer order)
//   alpha:   y   = outer_fmt(outer_sum * alpha)         (skipped when alpha == 1)
//   output:  C   = out_fmt(y)
// Every sum starts from +0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "arith/diag_stats.h"
#include "arith/fused_accum.h"
#include "arith/quantize.h"

namespace drift {

enum class SumOrder : uint8_t {
  sequential,  // k ascending
  reverse,     // k descending
  pairwise,    // recursive halving: sum(lo..hi) = fmt(sum(left half) + sum(right half))
  split,       // `split` interleaved partial sums (k mod split), each sequential, then added in order
  permuted,    // a seeded random order, one permutation per (call, block)
  splitk,      // `split` contiguous partial sums of ceil(n/split) terms each (the last may hold fewer or
               // none), each sequential, then added in order: cuBLASLt's split-K as measured on an H200
};

struct Accumulator {
  Format format;           // fp32 unless set
  RoundSpec round;         // rne, IEEE overflow unless set
  SumOrder order = SumOrder::sequential;
  int split = 2;           // for SumOrder::split and splitk: the number of partial sums
  int promote_every = 0;   // inner only: K-block when neither operand has block scales (0: all of K)
  std::optional<FusedModel> fused;  // inner only: the tensor-core fused multi-term model replaces `order`
  // Inner only, with `fused` and block-scaled operands: false (the two-level definition): each
  // K-block's inner sum is multiplied by its block scales in the outer format. true: the block scales
  // enter the products instead: every element is multiplied by its block's scale (exactly) before the
  // fused model sees it, so the groups align and cut the scaled products, and K is one block of the
  // two-level sum (the model's own promote_every says where the instruction adds to the running sum).
  // A hypothesis for block-scaled MMA (Blackwell tcgen05 kind::mxf8f6f4 / mxf4nvf4).
  bool scales_in_products = false;
  Accumulator();
};

struct MatmulPolicy {
  Quantizer a, b;
  std::optional<Format> product_format;  // products rounded to this (nullopt: exact)
  RoundSpec product_round;
  Accumulator inner, outer;
  Format out_format;
  RoundSpec out_round;
  MatmulPolicy();
};

// Per-call telemetry.
struct MatmulTelemetry {
  QuantStats a, b;
  uint64_t inner_adds = 0, inner_swamped = 0;  // rounded adds, and those that lost all of an addend
  uint64_t outer_adds = 0, outer_swamped = 0;
  bool fast_path = false;                       // which implementation produced C
  // Its name: "reference", or the fast kernel ("fast.fp32", "fast.fp32_pairs": the same arithmetic
  // by pairs of products, arith/matmul_pairs.h; "fast.narrow_rne", "fast.narrow_rtz", "fast.fused");
  // a backend names its own kernels (backend/backend.h). Static strings.
  const char* route = "reference";
  bool swamping_counted = true;                 // false when the fast path ran with count_swamping off
  // True only where the route proves that no element of C is -0: the fast kernels' own write into a
  // float C, each element an IEEE sum begun at +0 with nothing after it (no alpha, no output
  // rounding). A caller that needs +0 + C (a product added into a cleared C) may then skip that pass.
  bool no_negative_zero = false;
  // Diagnostics (filled only when MatmulContext::cast_error / check_bound ask for them).
  CastErrorStats a_cast, b_cast;
  BoundCheck bound;
  void merge(const MatmulTelemetry& o);
};

// A matrix view: element (r, c) is data[r*ld + c], or data[c*ld + r] when transposed. Elements are
// double (MatView: drift matmul, tests, the backends) or float (MatViewF: a model's tensors, read in place).
template <typename T>
struct MatViewOf {
  const T* data = nullptr;
  size_t rows = 0, cols = 0, ld = 0;
  bool transposed = false;
  double at(size_t r, size_t c) const { return transposed ? data[c * ld + r] : data[r * ld + c]; }
};
using MatView = MatViewOf<double>;
using MatViewF = MatViewOf<float>;

// An exact double copy of a float view (its stored rows, densely), in `storage`, as the same matrix.
MatView widened_copy(const MatViewF& v, std::vector<double>& storage);

struct MatmulWorkspace;  // arith/matmul_workspace.h

// Randomness and state for one call: stochastic rounding keys, delayed-scaling histories.
struct MatmulContext {
  uint64_t seed = 0;
  uint64_t stream = 0;                 // distinct per (step, site); the engine derives sub-streams
  DelayedState* delayed_a = nullptr;   // required when an operand uses delayed scaling
  DelayedState* delayed_b = nullptr;
  bool force_reference = false;        // always take the literal reference path
  bool count_swamping = false;         // the fast path counts swamping only when asked (its counting
                                       // kernel is several times slower); the reference always counts
  // Off: the caller reads none of this call's operand statistics (a training step whose telemetry
  // no metrics line reports), so the float entry may leave them out where they cost time: an MX
  // operand's cast counts and scale tallies, and the scan of an fp32 operand read in place (its
  // amax and subnormal count; a NaN or inf is then found by the kernel). C, the route, the
  // non-finite counts and delayed scaling's amax are the same either way.
  bool telemetry = true;
  // Diagnostics (off by default; nothing is computed when off). Neither changes C.
  bool cast_error = false;             // measure each operand's cast error (arith/cast_error.h)
  bool check_bound = false;            // compare C with its forward-error bound (arith/error_bound.h)
  // The caller's scratch memory, reused across its calls (arith/matmul_workspace.h); null: the call
  // allocates its own.
  MatmulWorkspace* workspace = nullptr;
};

// Sub-stream of the output rounding's random bits (stochastic output rounding draws word i*N + j of
// stream ctx.stream ^ (kMatmulStreamOut << 56)); shared by the reference and the fast path.
constexpr uint64_t kMatmulStreamOut = 5;

// C (M x N, row stride ldc) = A (M x K) * B (K x N) under `policy`.
MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc, const MatmulPolicy& policy,
                       const MatmulContext& ctx);

// The same for float operands, C written as floats: every C element is (float) of what the double
// entry writes (the same value when the output format fits in float), and the telemetry is the
// same. The operands are quantized from the float data in place and, where the element formats fit
// in float, kept as floats into the fast kernel; C comes back without a double copy when the fast
// path runs. C must not overlap A or B.
MatmulTelemetry matmul(const MatViewF& a, const MatViewF& b, float* c, size_t ldc, const MatmulPolicy& policy,
                       const MatmulContext& ctx);

// Quantized operands in the engine's canonical layout (both K-contiguous: A as M x K, B as N x K).
struct PreparedOperands {
  QuantizedOperand a, b;
  size_t kblock = 0;  // K-block of the two-level sum
};

void prepare_operands_into(PreparedOperands& ops, const MatView& a, const MatView& b, const MatmulPolicy& policy,
                           const MatmulContext& ctx);
// From float operands: the same operands, their values kept in float where the format fits
// (QuantizedOperand::in_float; widen() them for readers of q).
void prepare_operands_into(PreparedOperands& ops, const MatViewF& a, const MatViewF& b, const MatmulPolicy& policy,
                           const MatmulContext& ctx);

// The pieces of prepare_operands_into, for a backend that quantizes elsewhere (the CUDA backend):
// the shape check, the canonical layout (A as M x K, B as N x K, read in place through strides),
// each operand's random sub-stream, and the K-block of the two-level sum.
template <typename T>
void check_inner_dims(const MatViewOf<T>& a, const MatViewOf<T>& b) {
  if (b.rows != a.cols)
    throw std::invalid_argument("matmul: inner dimensions differ (A is " + std::to_string(a.rows) + "x" +
                                std::to_string(a.cols) + ", B is " + std::to_string(b.rows) + "x" +
                                std::to_string(b.cols) + ")");
}
template <typename T>
StridedInputOf<T> canonical_a(const MatViewOf<T>& a) {
  return a.transposed ? StridedInputOf<T>{a.data, 1, a.ld} : StridedInputOf<T>{a.data, a.ld, 1};
}
template <typename T>
StridedInputOf<T> canonical_b(const MatViewOf<T>& b) {
  return b.transposed ? StridedInputOf<T>{b.data, b.ld, 1} : StridedInputOf<T>{b.data, 1, b.ld};
}
inline uint64_t quantize_stream_a(const MatmulContext& ctx) { return ctx.stream ^ (uint64_t{7} << 56); }
inline uint64_t quantize_stream_b(const MatmulContext& ctx) { return ctx.stream ^ (uint64_t{8} << 56); }

// The significand bits of an operand's values as the kernels multiply them: its format's, and with
// inner.scales "products" (the block scales folded into the elements) those of the element times its
// scale: the same for a power of two, up to 24 for NVFP4's E4M3 scales
// (ScaleKindTraits::fold_element_bits: elements of at most that many bits stay within 24 folded).
int folded_significand_bits(const Quantizer& q, const Accumulator& inner);

// The smaller scale block when both operands have one (they must nest), else the one there is,
// else the promotion interval, else all of K. Throws std::invalid_argument when they do not nest.
size_t matmul_kblock(size_t k, size_t a_block_k, size_t b_block_k, const MatmulPolicy& policy);

// The slow, literal implementation of the definition above, on prepared operands.
void matmul_reference(const PreparedOperands& ops, double* c, size_t ldc, const MatmulPolicy& policy,
                      const MatmulContext& ctx, MatmulTelemetry& tel);

// The fast implementation, when it can prove bit-identity with the reference for this policy;
// returns false (and does nothing) otherwise. It reads operands in either storage (q or qf).
bool matmul_fast(const PreparedOperands& ops, double* c, size_t ldc, const MatmulPolicy& policy,
                 const MatmulContext& ctx, MatmulTelemetry& tel);
// The same with C written as floats ((float) of the double C).
bool matmul_fast(const PreparedOperands& ops, float* c, size_t ldc, const MatmulPolicy& policy,
                 const MatmulContext& ctx, MatmulTelemetry& tel);

// The Highway target matmul_fast dispatches to now (e.g. "AVX3"), and the targets compiled into it
// that this CPU supports (hwy target bits; tests select each with hwy::SetSupportedTargetsForTest).
const char* matmul_fast_target_name();
std::vector<int64_t> matmul_fast_targets();

// True when `acc` is fp32 (IEEE fields), rne, subnormals kept, sequential, no fused model: every
// rounded add is then one IEEE fp32 add (the condition of the fast paths, CPU and CUDA).
bool is_plain_fp32_sequential(const Accumulator& acc);

// Checks a policy for contradictions; returns an error message or "".
std::string validate_policy(const MatmulPolicy& policy);

const char* to_string(SumOrder o);
// The orders written with a part count ("split:S", "splitk:S"), held in Accumulator::split.
inline bool order_has_parts(SumOrder o) { return o == SumOrder::split || o == SumOrder::splitk; }
bool parse_sum_order(const std::string& s, SumOrder* out);

}  // namespace drift
