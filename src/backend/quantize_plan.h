// The host half of quantizing one operand with the steps of backend/quantize_steps.h: the plan
// before any pass, the tensor-level scale once pass 1 has reduced the tensor's amax, and the
// statistics, tensor scale and delayed-scaling history after the last pass. The CUDA quantizer
// (backend/cuda/device_quantizer.h) drives its kernels with these; run_quantize_plan_host drives
// the same steps in plain loops on the host, which is how tests/test_backend_quantize.cpp proves
// them equal to quantize_into.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arith/quantize.h"
#include "backend/quantize_steps.h"

namespace drift {

struct QuantizeSetup {
  QuantizePlan plan;          // array pointers still unset: the runner owns the memory
  bool hadamard = false;      // transform first (HadamardPlan), then plan.x is the transformed copy
  bool pass1 = false;         // input counts pass (tensor, block, tile, nvfp4)
  bool pass1_sets_scale = false;  // tensor, nvfp4: apply_tensor_amax before pass 2/3
  bool pass2 = false;         // region scales (block, tile, nvfp4)
  uint64_t row_blocks = 0;    // sizes of the row-block and region arrays (and of block_scale: row_blocks)
  uint64_t regions = 0;
  double tensor_scale = 1.0;  // QuantizedOperand::tensor_scale, once known
};

// Everything known before the input is read. Throws as quantize_into does (delayed scaling without
// a state). For delayed scaling the state's scale for this step is taken (and the state initialised).
QuantizeSetup begin_quantize(size_t rows, size_t k, const Quantizer& qz, uint64_t seed, uint64_t stream,
                             DelayedState* state);

// After pass 1 (pass1_sets_scale): the tensor's largest finite |x| sets the tensor scale (tensor) or
// the encode scale s_enc (nvfp4).
void apply_tensor_amax(QuantizeSetup& s, const Quantizer& qz, double amax);

// After the last pass: the statistics quantize_into reports, from the added-up counts; the tensor
// scale recorded (tensor, delayed) and the delayed state advanced, as quantize_into does.
QuantStats finish_quantize(QuantizeSetup& s, const Quantizer& qz, const QuantCounts& counts, DelayedState* state);

// Adds the counts of a scale exponent e (region_scale_step) / an element (quantize_step flags) /
// input counts to `c` (the host runner; the kernels do the same with atomics).
void add_scale_exponent(QuantCounts& c, int e);
void add_element_flags(QuantCounts& c, uint8_t flags);
void add_input_counts(QuantCounts& c, const InputCounts& n);

// quantize_into's contract (values in out.q, or in out.qf when `in_float`, scales, stats, delayed
// state) computed by the steps of quantize_steps.h in the kernels' passes, single-threaded on the host.
void run_quantize_plan_host(QuantizedOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
                            uint64_t seed, uint64_t stream, DelayedState* state, bool in_float);

}  // namespace drift
