#include "backend/matmul_plan.h"

#include <algorithm>

#include "arith/cast_span.h"
#include "arith/ops.h"

namespace drift {

namespace {

SumSpec sum_spec(const Accumulator& acc) {
  SumSpec s;
  s.format = acc.format;
  s.round = acc.round;
  s.order = acc.order;
  s.split = acc.split;
  return s;
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return !is_nan(x) && !is_inf(x); });
}

// The tensor-scale product, as the reference forms it.
double alpha_of(const PreparedOperands& ops, const MatmulPolicy& policy) {
  const double ta = ops.a.tensor_scale, tb = ops.b.tensor_scale;
  return ta * tb == 1.0 ? 1.0 : op_mul(ta, tb, policy.outer.format, policy.outer.round);
}

}  // namespace

ElementPlan make_element_plan(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx,
                              ElementPlanStorage& storage) {
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  ElementPlan p;
  p.a = A.q.data();
  p.b = B.q.data();
  p.a_scale = A.block_k ? A.block_scale.data() : nullptr;
  p.b_scale = B.block_k ? B.block_scale.data() : nullptr;
  p.a_block_k = A.block_k;
  p.b_block_k = B.block_k;
  p.a_blocks_per_row = A.blocks_per_row;
  p.b_blocks_per_row = B.blocks_per_row;
  p.m = A.rows;
  p.n = B.rows;
  p.k = A.k;
  p.kblock = std::max<size_t>(ops.kblock, 1);
  p.nblocks = p.k == 0 ? 0 : (p.k + p.kblock - 1) / p.kblock;
  p.round_products = policy.product_format.has_value();
  if (policy.product_format) p.product_format = *policy.product_format;
  p.product_round = policy.product_round;
  p.inner = sum_spec(policy.inner);
  p.outer = sum_spec(policy.outer);
  p.fused = policy.inner.fused.has_value();
  if (policy.inner.fused) p.model = *policy.inner.fused;
  // The operands hold element-format values (block and tensor scales are applied after the sum).
  p.fused_in_double = p.fused && fused_groups_exact_in_double(p.model) && fits_float(policy.a.format) &&
                      fits_float(policy.b.format);
  p.out_format = policy.out_format;
  p.out_round = policy.out_round;
  p.alpha = alpha_of(ops, policy);
  p.seed = ctx.seed;
  p.stream = ctx.stream;
  const uint64_t perm_stream = ctx.stream ^ (kStreamPerm << 56);
  storage.inner_order.clear();
  storage.outer_order.clear();
  if (policy.inner.order == SumOrder::permuted && !p.fused) {
    storage.inner_order.assign(p.nblocks * p.kblock, 0);
    for (uint64_t bi = 0; bi < p.nblocks; ++bi) {
      const uint64_t len = std::min<uint64_t>(p.kblock, p.k - bi * p.kblock);
      fill_block_order(storage.inner_order.data() + bi * p.kblock, len, true, ctx.seed, perm_stream, bi);
    }
    p.inner_order = storage.inner_order.data();
  }
  if (policy.outer.order == SumOrder::permuted) {
    storage.outer_order.assign(p.nblocks, 0);
    fill_block_order(storage.outer_order.data(), p.nblocks, true, ctx.seed, perm_stream, kOuterOrderBlock);
    p.outer_order = storage.outer_order.data();
  }
  return p;
}

bool fast_policy_applies(const MatmulPolicy& policy) {
  if (policy.product_format || !is_plain_fp32_sequential(policy.inner) || !is_plain_fp32_sequential(policy.outer))
    return false;
  return fits_float(policy.a.format) && fits_float(policy.b.format);
}

bool fast_plan_applies(const PreparedOperands& ops, const MatmulPolicy& policy) {
  if (!fast_policy_applies(policy)) return false;
  return all_finite(ops.a.q) && all_finite(ops.b.q) && all_finite(ops.a.block_scale) && all_finite(ops.b.block_scale);
}

FastPlan make_fast_plan_shape(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx) {
  FastPlan p;
  p.m = ops.a.rows;
  p.n = ops.b.rows;
  p.k = ops.a.k;
  p.kblock = std::max<size_t>(ops.kblock, 1);
  p.nblocks = p.k == 0 ? 0 : (p.k + p.kblock - 1) / p.kblock;
  p.scaled = ops.a.block_k || ops.b.block_k;
  p.alpha = static_cast<float>(alpha_of(ops, policy));  // on the fp32 grid: an fp32 product
  p.out_format = policy.out_format;
  p.out_round = policy.out_round;
  p.seed = ctx.seed;
  p.stream = ctx.stream;
  return p;
}

FastPlan make_fast_plan(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx,
                        FastPlanStorage& st) {
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  FastPlan p = make_fast_plan_shape(ops, policy, ctx);
  st.a.assign(A.q.begin(), A.q.end());  // exact: fast_plan_applies checked the formats fit a float
  st.b.assign(B.q.begin(), B.q.end());
  // Per-K-block scales (a scale block may span several K-blocks when the two operands' blocks nest).
  auto scales = [&](const QuantizedOperand& Q, std::vector<float>& out) {
    out.assign(Q.rows * p.nblocks, 1.0f);
    for (size_t r = 0; r < Q.rows; ++r)
      for (size_t bi = 0; bi < p.nblocks; ++bi)
        out[r * p.nblocks + bi] = static_cast<float>(Q.block_scale[r * Q.blocks_per_row + bi * p.kblock / Q.block_k]);
  };
  st.sa.clear();
  st.sb.clear();
  if (A.block_k) scales(A, st.sa);
  if (B.block_k) scales(B, st.sb);
  p.a = st.a.data();
  p.b = st.b.data();
  p.sa = A.block_k ? st.sa.data() : nullptr;
  p.sb = B.block_k ? st.sb.data() : nullptr;
  return p;
}

bool run_fast_plan_host(const FastPlan& plan, double* c, size_t ldc) {
  for (uint64_t i = 0; i < plan.m; ++i)
    for (uint64_t j = 0; j < plan.n; ++j) {
      const float y = fast_element(plan, i, j);
      if (is_nan(y) || is_inf(y)) return false;
      c[i * ldc + j] = fast_output(plan, y, i, j);
    }
  return true;
}

void run_element_plan_host(const ElementPlan& plan, double* c, size_t ldc, ElementCounts* counts) {
  for (uint64_t i = 0; i < plan.m; ++i)
    for (uint64_t j = 0; j < plan.n; ++j) c[i * ldc + j] = matmul_element(plan, i, j, counts);
}

void add_counts(MatmulTelemetry& tel, const ElementCounts& counts) {
  tel.inner_adds += counts.inner_adds;
  tel.inner_swamped += counts.inner_swamped;
  tel.outer_adds += counts.outer_adds;
  tel.outer_swamped += counts.outer_swamped;
}

}  // namespace drift
