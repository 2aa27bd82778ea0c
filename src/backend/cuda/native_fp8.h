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

}  // namespace drift
