// The tiled kernels for the fused tensor-core models (fused_tile_kernels.cu), launched from host code.
#pragma once

#include <cuda_runtime.h>

#include "backend/matmul_element.h"

namespace drift::cuda {

// The K-tile of the tiled fused kernels for this plan: a multiple of the model's group up to 32
// that is a multiple of its promotion interval or divides it; 0 where they do not apply (no fused
// model, an outer order other than sequential, groups above 32, a promotion interval that is not
// a multiple of the group, or one above 32 for a model the register-blocked kernel cannot take).
int fused_tile_k(const ElementPlan& plan);

// The same as launch_element_kernel (kernels.h) for a plan with fused_tile_k(plan) = kt > 0, tiled.
// Returns the kernel it launched: "tiled-float" / "tiled-double" (the register-blocked kernel in
// float where the model's cut terms, their sums and the operands' products are exact in float, else
// in double where fused_groups_exact_in_double holds, ElementPlan::fused_in_double) or "tiled"
// (the general tiled kernel, group_at per group).
const char* launch_fused_tile_kernel(const ElementPlan& plan, int kt, double* c, unsigned long long* counts,
                                     cudaStream_t stream);

}  // namespace drift::cuda
