// Builds the plain-data plans (backend/matmul_element.h) of one matmul call from its prepared
// operands, and runs them on the host: what the CUDA backend copies to the device, and what the
// host tests loop over to prove the device arithmetic against the CPU engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arith/matmul.h"
#include "backend/matmul_element.h"

namespace drift {

// Host arrays a plan points into (the seeded orders; they live as long as the plan is used).
struct ElementPlanStorage {
  std::vector<uint32_t> inner_order, outer_order;
};

// The general plan: every policy validate_policy accepts. Pointers refer to `ops` and `storage`.
ElementPlan make_element_plan(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx,
                              ElementPlanStorage& storage);

// True when the float fast body computes this call exactly (see fast_element), before looking at
// the result: the policy is one the fast body models and every operand value and scale is finite
// and a float. A non-finite fast result still sends the call to the general plan (overflow rules).
bool fast_plan_applies(const PreparedOperands& ops, const MatmulPolicy& policy);
// The policy half of fast_plan_applies (fp32 rne sequential sums, exact products, operand formats
// whose grids fit in float); the other half is that every value and scale is finite.
bool fast_policy_applies(const MatmulPolicy& policy);

// Float copies of the operands and scales for the fast body.
struct FastPlanStorage {
  std::vector<float> a, b, sa, sb;
};
FastPlan make_fast_plan(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx,
                        FastPlanStorage& storage);
// The same plan without its arrays (a, b, sa, sb unset): for operands that already live elsewhere
// (the CUDA backend's device-quantized operands). Reads only the operands' shapes and tensor scales.
FastPlan make_fast_plan_shape(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx);

// The fast body on the host: false (C untouched past the first non-finite value) when a value left
// the finite range, where only the general plan models the overflow rules.
bool run_fast_plan_host(const FastPlan& plan, double* c, size_t ldc);

// C = the plan, every element on the host (single-threaded; tests and small calls).
void run_element_plan_host(const ElementPlan& plan, double* c, size_t ldc, ElementCounts* counts);

// Adds and rounded-away counts into the telemetry the engine reports.
void add_counts(MatmulTelemetry& tel, const ElementCounts& counts);

}  // namespace drift
