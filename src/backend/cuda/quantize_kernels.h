// The CUDA quantize kernels, launched from host code (backend/cuda/device_quantizer.cpp). Each
// thread runs a step of backend/quantize_steps.h, which the host tests prove against the CPU
// quantizer (tests/test_backend_quantize.cpp); the kernels only decide who runs which step and add
// the counts into one QuantCounts in device memory (integer sums and maxima, by atomics: any order
// gives the same totals).
#pragma once

#include <cuda_runtime.h>

#include "backend/quantize_steps.h"

namespace drift::cuda {

// Pass 1 without blocks (tensor scaling): every element's input counts into *counts.
void launch_tensor_counts(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream);
// Pass 1 with blocks: row_block_counts for every row block (rows x blocks_per_row), totals into *counts.
void launch_row_block_counts(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream);
// Pass 2: region_scale_step for every region; scale exponents into *counts.
void launch_region_scales(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream);
// Pass 3: quantize_step for every element; element flags (and, with count_in_pass3, input counts)
// into *counts.
void launch_quantize_elements(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream);
// The random Hadamard transform: hadamard_step for every (row, group).
void launch_hadamard(const HadamardPlan& p, cudaStream_t stream);
// out[i] = in[i] for i < n (floats to doubles: exact).
void launch_widen(const float* in, double* out, uint64_t n, cudaStream_t stream);
// The fast kernel's per-K-block scales: out[r*nblocks + bi] = (float)block_scale[r*blocks_per_row +
// bi*kblock/block_k] (as make_fast_plan builds them on the host).
void launch_kblock_scales(const double* block_scale, uint64_t rows, uint64_t blocks_per_row, uint64_t block_k,
                          uint64_t nblocks, uint64_t kblock, float* out, cudaStream_t stream);

}  // namespace drift::cuda
