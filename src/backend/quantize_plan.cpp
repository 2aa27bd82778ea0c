#include "backend/quantize_plan.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "arith/catalogue.h"

namespace drift {

QuantizeSetup begin_quantize(size_t rows, size_t k, const Quantizer& qz, uint64_t seed, uint64_t stream,
                             DelayedState* state) {
  static const Format fp32 = *find_format("fp32");
  const Scaling& sc = qz.scaling;
  if (sc.emulate.element_step())
    throw std::invalid_argument(
        "scaling.emulate scale_bits/zero: microxcaling's element step runs in the host quantizer (quantize_into) only");
  QuantizeSetup s;
  QuantizePlan& p = s.plan;
  p.rows = rows;
  p.k = k;
  p.format = qz.format;
  p.round = qz.round;
  p.fp32 = fp32;
  p.seed = seed;
  p.stream = stream;
  s.hadamard = sc.hadamard != 0;
  const ScaleKindTraits& kind = scale_kind_traits(sc.kind);
  // Kinds that need the tensor's amax count it in pass 1 and set the tensor-level multiplier from it
  // (apply_tensor_amax) before the element pass.
  s.pass1_sets_scale = kind.needs_tensor_amax();
  if (kind.blocked()) {
    p.block = static_cast<uint64_t>(sc.block);
    p.blocks_per_row = (k + p.block - 1) / p.block;
    p.region_rows = sc.two_d ? p.block : 1;
    p.spec = block_scale_spec(qz, 1.0);  // a two-level kind's s_enc follows from pass 1
    s.pass1 = s.pass2 = true;
    s.row_blocks = rows * p.blocks_per_row;
    s.regions = region_count(p);
  } else {
    // One multiplier for every element: 1 (exact) without a tensor rule, else known now (the
    // state's) or after pass 1 (the tensor's amax).
    p.mult_exact = kind.tensor_rule == TensorScaleRule::none;
    p.count_in_pass3 = !kind.needs_tensor_amax();
    s.pass1 = kind.needs_tensor_amax();
    if (!kind.needs_tensor_amax()) p.mult = tensor_level_multiplier(qz, 0.0, state);
  }
  return s;
}

void apply_tensor_amax(QuantizeSetup& s, const Quantizer& qz, double amax) {
  const double m = tensor_level_multiplier(qz, amax, nullptr);
  if (scale_kind_traits(qz.scaling.kind).two_level()) {
    s.plan.spec.s_enc = m;
    s.tensor_scale = tensor_dequant_scale(m);
  } else {
    s.plan.mult = m;
  }
}

QuantStats finish_quantize(QuantizeSetup& s, const Quantizer& qz, const QuantCounts& c, DelayedState* state) {
  QuantStats st;
  st.elements = s.plan.rows * s.plan.k;
  st.clipped = c.clipped;
  st.flushed = c.flushed;
  st.subnormal = c.subnormal;
  st.nonfinite = c.nonfinite;
  st.amax = double_of(c.amax_bits);
  st.scale_count = c.scale_count;
  if (c.scale_count) {
    st.scale_exp_min = c.scale_exp_min;
    st.scale_exp_max = c.scale_exp_max;
  }
  // The CPU adds the exponents as doubles: integers of magnitude < 1100 (floor(log2) of a positive
  // double), so every partial sum is an exact integer while fewer than 2^42 scales are added, and its
  // total equals this integer sum converted once, in any order.
  st.scale_exp_sum = static_cast<double>(c.scale_exp_sum);
  for (int i = 0; i <= 2 * QuantCounts::kHistOffset; ++i)
    if (c.scale_exp_hist[i]) st.scale_exp_hist.add(i - QuantCounts::kHistOffset, c.scale_exp_hist[i]);
  const ScaleKindTraits& kind = scale_kind_traits(qz.scaling.kind);
  if (!kind.blocked() && kind.tensor_rule != TensorScaleRule::none) {
    s.tensor_scale = tensor_dequant_scale(s.plan.mult);
    record_scale(st, s.tensor_scale);
  }
  if (kind.keeps_history()) delayed_record_step(*state, qz, st.amax, st.nonfinite);
  return st;
}

void add_scale_exponent(QuantCounts& c, int e) {
  ++c.scale_count;
  c.scale_exp_sum += e;
  c.scale_exp_min = std::min(c.scale_exp_min, e);
  c.scale_exp_max = std::max(c.scale_exp_max, e);
  ++c.scale_exp_hist[std::clamp(e, -QuantCounts::kHistOffset, QuantCounts::kHistOffset) + QuantCounts::kHistOffset];
}

void add_element_flags(QuantCounts& c, uint8_t flags) {
  c.clipped += (flags & kElemClipped) != 0;
  c.flushed += (flags & kElemFlushed) != 0;
  c.subnormal += (flags & kElemSubnormal) != 0;
  c.nonfinite_values += (flags & kElemNonfiniteValue) != 0;
}

void add_input_counts(QuantCounts& c, const InputCounts& n) {
  c.nonfinite += n.nonfinite;
  c.amax_bits = std::max<unsigned long long>(c.amax_bits, bits_of(n.amax));
}

void run_quantize_plan_host(QuantizedOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
                            uint64_t seed, uint64_t stream, DelayedState* state, bool in_float) {
  QuantizeSetup s = begin_quantize(rows, k, qz, seed, stream, state);
  QuantizePlan& p = s.plan;
  p.x = x.p;
  p.rs = x.rs;
  p.cs = x.cs;
  std::vector<double> rotated;
  if (s.hadamard) {
    rotated.resize(rows * k);
    const HadamardPlan h{x.p, x.rs, x.cs, rows, k, qz.scaling.hadamard, qz.scaling.hadamard_seed, rotated.data()};
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t g = 0; g < hadamard_groups_per_row(h); ++g) hadamard_step(h, r, g);
    p.x = rotated.data();
    p.rs = k;
    p.cs = 1;
  }
  out.rows = rows;
  out.k = k;
  out.in_float = in_float;
  out.q.assign(in_float ? 0 : rows * k, 0.0);
  out.qf.assign(in_float ? rows * k : 0, 0.0f);
  out.block_k = p.block;
  out.blocks_per_row = p.blocks_per_row;
  out.block_scale.assign(s.row_blocks, 1.0);
  p.q = in_float ? nullptr : out.q.data();
  p.qf = in_float ? out.qf.data() : nullptr;
  std::vector<double> rb_amax(s.row_blocks), region_mult(s.regions);
  std::vector<uint32_t> rb_nonfinite(s.row_blocks);
  std::vector<uint8_t> region_state(s.regions);
  p.rb_amax = rb_amax.data();
  p.rb_nonfinite = rb_nonfinite.data();
  p.region_mult = region_mult.data();
  p.region_state = region_state.data();
  p.block_scale = out.block_scale.data();

  QuantCounts counts;
  const uint64_t n = static_cast<uint64_t>(rows) * k;
  if (s.pass1) {
    if (p.block) {
      for (uint64_t i = 0; i < s.row_blocks; ++i) {
        uint64_t r, bi;
        row_block_at(p, i, &r, &bi);
        add_input_counts(counts, row_block_counts(p, r, bi));
      }
    } else {
      InputCounts in;
      for (uint64_t e = 0; e < n; ++e) {
        uint64_t r, c;
        element_at(p, e, &r, &c);
        in.add(input_at(p, r, c));
      }
      add_input_counts(counts, in);
    }
    if (s.pass1_sets_scale) apply_tensor_amax(s, qz, double_of(counts.amax_bits));
  }
  if (s.pass2) {
    for (uint64_t g = 0; g < s.regions; ++g) {
      int e;
      if (region_scale_step(p, g, &e)) add_scale_exponent(counts, e);
    }
  }
  InputCounts in;
  for (uint64_t e = 0; e < n; ++e) {
    uint64_t r, c;
    element_at(p, e, &r, &c);
    double v;
    add_element_flags(counts, quantize_step(p, r, c, &v));
    if (p.count_in_pass3) in.add(v);
  }
  add_input_counts(counts, in);
  out.stats = finish_quantize(s, qz, counts, state);
  out.tensor_scale = s.tensor_scale;
}

}  // namespace drift
