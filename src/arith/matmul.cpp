// The matmul entry point: canonical layout, operand quantization, then the fast path when it is
// provably identical, else the literal reference.
#include "arith/matmul.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "arith/cast_error.h"
#include "arith/catalogue.h"
#include "arith/enum_names.h"
#include "arith/error_bound.h"
#include "arith/matmul_in_place.h"
#include "arith/matmul_workspace.h"
#include "arith/scale_kinds.h"

namespace drift {

Accumulator::Accumulator() : format(*find_format("fp32")) { round.overflow = Overflow::ieee; }

MatmulPolicy::MatmulPolicy() : out_format(*find_format("fp32")) {
  a.format = b.format = *find_format("fp32");
  out_round.overflow = Overflow::ieee;
}

void MatmulTelemetry::merge(const MatmulTelemetry& o) {
  a.merge(o.a);
  b.merge(o.b);
  inner_adds += o.inner_adds;
  inner_swamped += o.inner_swamped;
  outer_adds += o.outer_adds;
  outer_swamped += o.outer_swamped;
  a_cast.merge(o.a_cast);
  b_cast.merge(o.b_cast);
  bound.merge(o.bound);
}

bool is_plain_fp32_sequential(const Accumulator& acc) {
  return is_binary32(acc.format) && acc.round.mode == Rounding::rne && acc.round.subnormals == Subnormals::keep &&
         acc.order == SumOrder::sequential && !acc.fused;
}

namespace {

std::string validate_accumulator(const Accumulator& acc, const char* name) {
  if (order_has_parts(acc.order) && acc.split < 1) return std::string(name) + ".split must be >= 1";
  if (acc.promote_every < 0) return std::string(name) + ".promote_every must be >= 0";
  if (acc.round.sr_bits < 1 || acc.round.sr_bits > 32) return std::string(name) + ".sr_bits must be in 1..32";
  return "";
}

std::string validate_quantizer(const Quantizer& q, const char* name) {
  const Scaling& s = q.scaling;
  const ScaleKindTraits& kind = scale_kind_traits(s.kind);
  const std::string n(name);
  if (kind.blocked() && s.block < 1) return n + ".scaling.block must be >= 1";
  if (kind.needs_float_elements && q.format.kind != Kind::floating)
    return n + ": block scaling needs a floating-point element format";
  if (s.emulate.any()) {
    if (kind.block_rule != BlockScaleRule::e8m0_exponent)
      return n + ".scaling.emulate: microxcaling's departures apply to block (MX) scaling only";
    if (s.emulate.exponent == ExpSource::log2_fp32 && s.rule != ExpRule::floor)
      return n + ".scaling.emulate.exponent log2_fp32 replaces the floor rule's exponent: it needs rule floor";
    if (s.emulate.nearest_sum_fp32 && q.round.mode != Rounding::rna)
      return n + ".scaling.emulate.nearest_sum fp32 is the float32 sum of microxcaling's nearest rounding: it needs rounding rna";
    if (s.emulate.scale_bits != 0 && (s.emulate.scale_bits < 2 || s.emulate.scale_bits > 30))
      return n + ".scaling.emulate.scale_bits must be 0 (E8M0) or in 2..30";
  }
  if (s.hadamard != 0 && s.hadamard != 16 && s.hadamard != 32) return n + ".scaling.hadamard must be 0, 16 or 32";
  if (s.history < 1) return n + ".scaling.history must be >= 1";
  if (!(s.amax_floor > 0)) return n + ".scaling.amax_floor must be > 0";
  if (q.round.sr_bits < 1 || q.round.sr_bits > 32) return n + ".sr_bits must be in 1..32";
  return "";
}

// Why an operand's block scales cannot be folded into its elements (inner.scales "products"), or "".
// Folding must be exact and stay narrow: E8M0 powers of two on any element, NVFP4's E4M3 scales
// (4 significand bits) on elements of at most 20 (ScaleKindTraits::fold_element_bits).
std::string fold_scales_error(const Quantizer& q, const char* name) {
  const ScaleKindTraits& kind = scale_kind_traits(q.scaling.kind);
  if (!kind.blocked()) return "";  // (no block scales: checked once for both operands)
  if (kind.fold_element_bits == 0) {
    std::string folding;  // the kinds whose scales fold, "block or nvfp4"
    for (const ScaleKindTraits& t : kScaleKinds)
      if (t.fold_element_bits) {
        if (!folding.empty()) folding += " or ";
        folding += t.name;
      }
    return std::string(name) + ".scaling: inner.scales \"products\" takes " + folding + " scaling";
  }
  if (significand_bits(q.format) > kind.fold_element_bits)
    return std::string(name) + ".format: inner.scales \"products\" with " + kind.name +
           " scales needs elements of at most " + std::to_string(kind.fold_element_bits) + " significand bits";
  return "";
}

// The K-extent of an operand's scale blocks (QuantizedOperand::block_k): the block for the per-block
// kinds, 0 for one scale per tensor or none.
size_t scale_block_k(const Quantizer& q) {
  const bool blocked = scale_kind_traits(q.scaling.kind).blocked();
  return blocked && q.scaling.block > 0 ? static_cast<size_t>(q.scaling.block) : 0;
}

// Each K-block of the sum must lie inside one scale block of each operand: the smaller scale block
// divides the larger.
bool scale_blocks_nest(size_t a_block_k, size_t b_block_k) {
  if (!a_block_k || !b_block_k) return true;
  return std::max(a_block_k, b_block_k) % std::min(a_block_k, b_block_k) == 0;
}

std::string nesting_error(size_t a_block_k, size_t b_block_k) {
  return "scale blocks of a (" + std::to_string(a_block_k) + ") and b (" + std::to_string(b_block_k) +
         ") do not nest (the smaller scale block must divide the larger)";
}

}  // namespace

std::string validate_policy(const MatmulPolicy& p) {
  for (auto [q, name] : {std::pair{&p.a, "a"}, std::pair{&p.b, "b"}})
    if (auto e = validate_quantizer(*q, name); !e.empty()) return e;
  if (auto e = validate_accumulator(p.inner, "inner"); !e.empty()) return e;
  if (auto e = validate_accumulator(p.outer, "outer"); !e.empty()) return e;
  if (p.outer.fused) return "outer: the fused tensor-core model applies to the inner sum only";
  if (!p.product_format && significand_bits(p.a.format) + significand_bits(p.b.format) > 53)
    return "products of " + format_name(p.a.format) + " x " + format_name(p.b.format) +
           " operands are not exact in double: set a product format (e.g. fp64)";
  if (p.a.scaling.hadamard != p.b.scaling.hadamard || p.a.scaling.hadamard_seed != p.b.scaling.hadamard_seed)
    return "a and b must use the same Hadamard transform (size and seed), or it does not cancel in the product";
  if (const size_t ka = scale_block_k(p.a), kb = scale_block_k(p.b); !scale_blocks_nest(ka, kb))
    return "b.scaling.block: " + nesting_error(ka, kb);
  if (p.outer.scales_in_products) return "outer.scales: block scales enter the products of the inner sum only";
  if (p.inner.scales_in_products) {
    if (!p.inner.fused) return "inner.scales \"products\" needs inner.fused (the groups that align the scaled products)";
    for (auto [q, name] : {std::pair{&p.a, "a"}, std::pair{&p.b, "b"}})
      if (auto e = fold_scales_error(*q, name); !e.empty()) return e;
    if (!scale_block_k(p.a) && !scale_block_k(p.b)) return "inner.scales \"products\" needs block-scaled operands";
  }
  return "";
}

namespace {

// The quantizer's scratch in the caller's workspace (null without one: the quantizer's own).
QuantizeWorkspace* quantize_workspace(const MatmulContext& ctx) {
  return ctx.workspace ? &ctx.workspace->quantize : nullptr;
}

// One canonical operand (rows x k) into `out`. k_major: the float entry lets an operand stored the
// other way round (A as K x M, B as K x N) stay so, QuantizedOperand::k_major, which its fast path
// reads without a transposition (B always; A where the fp32 kernel will read it); every other reader
// widens it first. (The double entry has no such order: its operands are the engine's own copies.)
template <typename T>
void quantize_operand(QuantizedOperand& out, const StridedInputOf<T>& x, size_t rows, size_t k, const Quantizer& qz,
                      uint64_t stream, DelayedState* delayed, const MatmulContext& ctx, bool k_major) {
  if constexpr (std::is_same_v<T, float>)
    quantize_into(out, x, rows, k, qz, ctx.seed, stream, delayed, quantize_workspace(ctx), k_major, ctx.telemetry);
  else
    quantize_into(out, x, rows, k, qz, ctx.seed, stream, delayed, quantize_workspace(ctx));
}

// Each operand's quantization draws its random bits from a sub-stream of its own.
template <typename T>
void quantize_a(PreparedOperands& ops, const MatViewOf<T>& a, const MatmulPolicy& policy, const MatmulContext& ctx,
                bool k_major = false) {
  quantize_operand(ops.a, canonical_a(a), a.rows, a.cols, policy.a, quantize_stream_a(ctx), ctx.delayed_a, ctx,
                   k_major);
}
template <typename T>
void quantize_b(PreparedOperands& ops, const MatViewOf<T>& b, const MatmulPolicy& policy, const MatmulContext& ctx,
                bool k_major = false) {
  quantize_operand(ops.b, canonical_b(b), b.cols, b.rows, policy.b, quantize_stream_b(ctx), ctx.delayed_b, ctx,
                   k_major);
}

// Whether every element of q (quantized by qz) times its block's scale is a float, exactly: the
// significands fit float's together (folded_significand_bits) and the scales keep the element
// format's range among float's normals. (MX's E8M0 scales can reach 2^+-127, far past them.)
bool folds_in_float(const QuantizedOperand& q, const Quantizer& qz, const Accumulator& inner) {
  if (!q.in_float || folded_significand_bits(qz, inner) > 24) return false;
  double lo = HUGE_VAL, hi = 0;
  for (double s : q.block_scale) {
    if (s != 0) lo = std::min(lo, std::fabs(s));
    hi = std::max(hi, std::fabs(s));
  }
  return !(lo * qz.format.min_positive < 0x1p-126) && hi * qz.format.max_finite < 0x1p128;
}

// inner.scales_in_products: each element times its block's scale (exact: a power of two, or an E4M3
// scale on a narrow element; validate_policy), the operand then without block scales. In float,
// where the products are floats (folds_in_float): a multiply per element as the operand lies, and
// the fast kernels' SIMD packing of float operands after it; else in double.
void fold_block_scales(QuantizedOperand& q, const Quantizer& qz, const Accumulator& inner) {
  if (!q.block_k) return;
  const size_t bpr = q.blocks_per_row;
  auto block_end = [&](size_t b) { return std::min(q.k, (b + 1) * q.block_k); };
  if (folds_in_float(q, qz, inner)) {
    if (q.k_major) {  // element (r, i) at qf[i * rows + r]: each block's scales gathered once
      std::vector<float> s(q.rows);
      for (size_t b = 0; b < bpr; ++b) {
        for (size_t r = 0; r < q.rows; ++r) s[r] = static_cast<float>(q.block_scale[r * bpr + b]);
        for (size_t i = b * q.block_k; i < block_end(b); ++i) {
          float* col = q.qf.data() + i * q.rows;
          for (size_t r = 0; r < q.rows; ++r) col[r] *= s[r];
        }
      }
    } else {
      for (size_t r = 0; r < q.rows; ++r) {
        float* row = q.qf.data() + r * q.k;
        for (size_t b = 0; b < bpr; ++b) {
          const float s = static_cast<float>(q.block_scale[r * bpr + b]);
          for (size_t i = b * q.block_k; i < block_end(b); ++i) row[i] *= s;
        }
      }
    }
  } else {
    q.widen();
    for (size_t r = 0; r < q.rows; ++r)
      for (size_t i = 0; i < q.k; ++i) q.q[r * q.k + i] *= q.block_scale[r * bpr + i / q.block_k];
  }
  q.block_k = 0;
  q.blocks_per_row = 0;
  q.block_scale.clear();
}

// The K-block of the two-level sum, after folding the block scales into the operands where the policy
// says so (then K is one block).
void set_kblock(PreparedOperands& ops, const MatmulPolicy& policy) {
  if (policy.inner.scales_in_products) {
    fold_block_scales(ops.a, policy.a, policy.inner);
    fold_block_scales(ops.b, policy.b, policy.inner);
    ops.kblock = std::max<size_t>(ops.a.k, 1);
    return;
  }
  ops.kblock = matmul_kblock(ops.a.k, ops.a.block_k, ops.b.block_k, policy);
}

template <typename T>
void prepare_operands_impl(PreparedOperands& ops, const MatViewOf<T>& a, const MatViewOf<T>& b,
                           const MatmulPolicy& policy, const MatmulContext& ctx) {
  check_inner_dims(a, b);
  quantize_a(ops, a, policy, ctx);
  quantize_b(ops, b, policy, ctx);
  set_kblock(ops, policy);
}

}  // namespace

int folded_significand_bits(const Quantizer& q, const Accumulator& inner) {
  const int bits = significand_bits(q.format);
  const ScaleKindTraits& kind = scale_kind_traits(q.scaling.kind);
  if (!inner.scales_in_products || !kind.blocked() || kind.fold_element_bits >= 64) return bits;
  return bits + (24 - kind.fold_element_bits);
}

size_t matmul_kblock(size_t k, size_t a_block_k, size_t b_block_k, const MatmulPolicy& policy) {
  const size_t ka = a_block_k, kb = b_block_k;
  if (!scale_blocks_nest(ka, kb)) throw std::invalid_argument("matmul: " + nesting_error(ka, kb));
  if (ka && kb) return std::min(ka, kb);
  if (ka || kb) return ka ? ka : kb;
  return policy.inner.promote_every > 0 ? static_cast<size_t>(policy.inner.promote_every) : std::max<size_t>(k, 1);
}

void prepare_operands_into(PreparedOperands& ops, const MatView& a, const MatView& b, const MatmulPolicy& policy,
                           const MatmulContext& ctx) {
  prepare_operands_impl(ops, a, b, policy, ctx);
}

void prepare_operands_into(PreparedOperands& ops, const MatViewF& a, const MatViewF& b, const MatmulPolicy& policy,
                           const MatmulContext& ctx) {
  prepare_operands_impl(ops, a, b, policy, ctx);
}

MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc, const MatmulPolicy& policy,
                       const MatmulContext& ctx) {
  if (auto err = validate_policy(policy); !err.empty()) throw std::invalid_argument("matmul policy: " + err);
  MatmulWorkspace own;  // (used only when the caller passes no workspace)
  PreparedOperands& ops = (ctx.workspace ? *ctx.workspace : own).ops_double;
  prepare_operands_into(ops, a, b, policy, ctx);
  MatmulTelemetry tel;
  tel.a = ops.a.stats;
  tel.b = ops.b.stats;
  if (!ctx.force_reference && matmul_fast(ops, c, ldc, policy, ctx, tel))
    tel.fast_path = true;
  else
    matmul_reference(ops, c, ldc, policy, ctx, tel);
  if (ctx.cast_error) {  // the inputs as prepare_operands_into read them (A as M x K, B as N x K)
    const StridedInput ak = a.transposed ? StridedInput{a.data, 1, a.ld} : StridedInput{a.data, a.ld, 1};
    const StridedInput bk = b.transposed ? StridedInput{b.data, b.ld, 1} : StridedInput{b.data, 1, b.ld};
    accumulate_cast_error(tel.a_cast, ak, ops.a, policy.a.scaling.hadamard != 0);
    accumulate_cast_error(tel.b_cast, bk, ops.b, policy.b.scaling.hadamard != 0);
  }
  if (ctx.check_bound) tel.bound = check_matmul_bound(ops, policy, c, ldc);
  return tel;
}

MatView widened_copy(const MatViewF& v, std::vector<double>& storage) {
  const size_t sr = v.transposed ? v.cols : v.rows, sc = v.transposed ? v.rows : v.cols;  // stored shape
  storage.resize(sr * sc);
  for (size_t r = 0; r < sr; ++r)
    for (size_t j = 0; j < sc; ++j) storage[r * sc + j] = v.data[r * v.ld + j];
  return MatView{storage.data(), v.rows, v.cols, sc, v.transposed};
}

MatmulTelemetry matmul(const MatViewF& a, const MatViewF& b, float* c, size_t ldc, const MatmulPolicy& policy,
                       const MatmulContext& ctx) {
  const size_t m = a.rows, n = b.cols;
  MatmulWorkspace own;  // (used only when the caller passes no workspace)
  MatmulWorkspace& ws = ctx.workspace ? *ctx.workspace : own;
  std::vector<double>& wide_c = ws.wide_c;  // C from the double-only paths, before it becomes float
  auto narrow_c = [&](const double* w) {
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = static_cast<float>(w[i * n + j]);
  };
  if (ctx.cast_error || ctx.check_bound) {
    // Diagnostic passes measure against the double inputs and C: run the double entry on exact
    // double copies (rare calls; speed does not matter here).
    const MatView da = widened_copy(a, ws.wide_a), db = widened_copy(b, ws.wide_b);
    wide_c.resize(m * n);
    MatmulTelemetry tel = matmul(da, db, wide_c.data(), n, policy, ctx);
    narrow_c(wide_c.data());
    return tel;
  }
  if (auto err = validate_policy(policy); !err.empty()) throw std::invalid_argument("matmul policy: " + err);
  check_inner_dims(a, b);
  PreparedOperands& ops = ws.ops_float;
  // An operand whose quantizer is the identity is read where it lies (arith/matmul_in_place.h);
  // the others are quantized. Each operand is quantized at most once per call (delayed scaling's
  // history must see one amax per call), except that an in-place one the fast path could not use
  // is quantized afterwards, which for the identity is only a copy.
  // The in-place scan serves the telemetry (the magnitudes, the subnormal count) and the routing (a
  // NaN or inf goes to the reference). Without telemetry nothing is read, unless the swamping
  // counts need the smallest magnitudes: the fp32 kernel, the one an fp32 operand in place can
  // reach, flags a NaN or inf among its results and declines (a NaN or inf in row i of A, or column
  // j of B, makes every C[i][j] of that row or column NaN or inf: inf times 0 is NaN, inf times
  // anything else inf, and a sum holding either never returns to a finite value), and the call then
  // takes the quantized route below, which finds it.
  const InPlaceScan scan = ctx.telemetry || ctx.count_swamping ? InPlaceScan::full : InPlaceScan::none;
  InPlaceOperand ia, ib;
  const bool a_in = !ctx.force_reference && is_identity_quantizer(policy.a) && in_place_operand(a, false, ops.a, ia, scan);
  const bool b_in = !ctx.force_reference && is_identity_quantizer(policy.b) && in_place_operand(b, true, ops.b, ib, scan);
  // An A stored K x M stays so where the fp32 kernel reads it (it steps A by columns); the fused and
  // narrow kernels would take it as rows, a transposition either way.
  const bool a_k_major = !ctx.force_reference && is_plain_fp32_sequential(policy.inner) && !policy.product_format;
  if (!a_in) quantize_a(ops, a, policy, ctx, a_k_major);
  if (!b_in) quantize_b(ops, b, policy, ctx, !ctx.force_reference);
  set_kblock(ops, policy);
  MatmulTelemetry tel;
  tel.a = ops.a.stats;
  tel.b = ops.b.stats;
  if (a_in || b_in) {
    if (matmul_fast_in_place(ops, a_in ? &ia : nullptr, b_in ? &ib : nullptr, c, ldc, policy, ctx, tel)) {
      tel.fast_path = true;
      return tel;
    }
    if (a_in) quantize_a(ops, a, policy, ctx, a_k_major);
    if (b_in) quantize_b(ops, b, policy, ctx, true);
    tel.a = ops.a.stats;  // (an operand that went unread now has its counts, a non-finite one too)
    tel.b = ops.b.stats;
  }
  if (!ctx.force_reference && matmul_fast(ops, c, ldc, policy, ctx, tel)) {
    tel.fast_path = true;
  } else {
    ops.a.widen();
    ops.b.widen();
    wide_c.resize(m * n);
    matmul_reference(ops, wide_c.data(), n, policy, ctx, tel);
    narrow_c(wide_c.data());
  }
  return tel;
}

namespace {
const char* const kOrderNames[] = {"sequential", "reverse", "pairwise", "split", "permuted", "splitk"};
}
const char* to_string(SumOrder o) { return enum_name(o, kOrderNames); }
bool parse_sum_order(const std::string& s, SumOrder* out) { return enum_from_name(s, kOrderNames, out); }

}  // namespace drift
