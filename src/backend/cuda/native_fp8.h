// "cuda-native": the matmul on the GPU's real FP8 tensor cores through cuBLASLt, NOT the simulator.
// Operands are quantized on the CPU by the policy's quantizers (fp8_e4m3 / fp8_e5m2 elements,
// no scaling or per-tensor scaling), encoded to FP8 bytes, and multiplied by cublasLtMatmul with
// their dequantisation scales as A/B scale pointers and an fp32 output. Its results are what the
// hardware gives; compare them with the simulator's tensor-core models (e.g. the h100_fp8 preset)
// to measure bit agreement (scripts/bit_agreement.py, scripts/gpu_check.sh).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace drift {

// fast_accum: CUBLASLT_MATMUL_DESC_FAST_ACCUM (Hopper's FP8 fast accumulation, no promotion).
std::unique_ptr<Backend> make_native_fp8_backend(bool fast_accum);

// The cuBLASLt algorithm a cuda-native backend's last matmul ran (from its heuristic's first
// choice). Its K split is part of the summation order: with splitk > 1 the K range is cut into
// parts accumulated apart and reduced afterwards (reduction: cublasLtReductionScheme_t), which the
// sum order splitk:S describes (docs/cuda.md). id -1: no matmul yet, or not a cuda-native backend.
struct NativeFp8Algorithm {
  int id = -1, tile = 0, splitk = 1, reduction = 0, stages = 0, swizzle = 0, custom = 0;
};
NativeFp8Algorithm native_fp8_last_algorithm(const Backend& backend);

// Device 0's compute capability as 10 * major + minor (90 for Hopper), 0 when it cannot be read:
// which tensor-core model cuBLASLt's FP8 GEMM should be compared with depends on it.
int native_fp8_compute_capability();

}  // namespace drift
