// The CUDA backend (compiled when CMake's DRIFT_CUDA is on). See backend/backend.h for the contract
// and docs/cuda.md for what runs where.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace drift {

// Number of CUDA devices; 0 with *why set when there are none or the runtime cannot be used.
int cuda_device_count(std::string* why);

// "cuda" (native = false): the simulator's definition on the GPU, bit-identical to the CPU engine;
// operands are quantized on the GPU, or with quantize_on_device = false by the CPU engine's
// quantizers and uploaded (the same results; for comparisons).
// "cuda-native": cuBLASLt FP8 GEMM on the tensor cores (see backend/cuda/native_fp8.h), with
// fast_accum choosing Hopper's FP8 fast accumulation. Throws BackendError when no device can be used.
std::unique_ptr<Backend> make_cuda_backend(bool native, bool fast_accum, bool quantize_on_device = true);

// Timings for drift bench gemm (seconds per call, averaged over calls filling min_seconds).
struct CudaGemmTiming {
  double kernel_s = 0;   // the device matmul on device-resident quantized operands (no copies)
  double call_s = 0;     // the whole backend call: input copies, quantization, kernel, copy back
  bool fast = false;     // the float fast kernel ran (else one of the general kernels)
  // The kernel that ran: "fast", "tiled-float" / "tiled-double" (the register-blocked fused tile
  // kernel in that arithmetic), "tiled" (the general fused tile kernel) or "element".
  const char* path = "element";
};
CudaGemmTiming time_cuda_matmul(const MatView& a, const MatView& b, const MatmulPolicy& policy, double min_seconds,
                                bool quantize_on_device = true);

// quantize_into's contract computed by the CUDA quantizer (backend/cuda/device_quantizer.h) and
// copied back: values (in out.qf when want_float and the format's grid fits in float), scales,
// stats, delayed state. For the GPU tests, which compare it with quantize_into.
void cuda_quantize(QuantizedOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
                   uint64_t seed, uint64_t stream, DelayedState* state, bool want_float);

// cuBLAS fp32 SGEMM (CUBLAS_DEFAULT_MATH: no TF32) on device-resident m x k and k x n operands.
double time_cublas_sgemm(size_t m, size_t n, size_t k, double min_seconds);

}  // namespace drift
