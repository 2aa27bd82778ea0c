// The CUDA matmul kernels, launched from host code. Each thread's arithmetic is a host/device body
// of backend/matmul_element.h, which the host tests prove against the CPU engine.
#pragma once

#include <cuda_runtime.h>

#include "backend/matmul_element.h"

namespace drift::cuda {

// c[i*n + j] = matmul_element(plan, i, j) for every element; plan pointers are device pointers.
// counts (device, 4 x unsigned long long, zeroed by the caller): inner adds, inner swamped, outer
// adds, outer swamped are added there; nullptr for no counting.
void launch_element_kernel(const ElementPlan& plan, double* c, unsigned long long* counts, cudaStream_t stream);

// c[i*n + j] = fast_output(plan, fast_element(plan, i, j)) by a tiled kernel (same operations in the
// same order per element); *nonfinite (device int, zeroed by the caller) is set when any element's
// value left the finite range, in which case c must be recomputed by the element kernel.
void launch_fast_kernel(const FastPlan& plan, double* c, int* nonfinite, cudaStream_t stream);

}  // namespace drift::cuda
