// The CUDA backend (compiled when CMake's DRIFT_CUDA is on). See backend/backend.h for the contract
// and docs/cuda.md for what runs where.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace drift {

// Number of CUDA devices; 0 with *why set when there are none or the runtime cannot be used.
int cuda_device_count(std::string* why);

// "cuda" (native = false): the simulator's definition on the GPU, bit-identical to the CPU engine.
// "cuda-native": cuBLASLt FP8 GEMM on the tensor cores (see backend/cuda/native_fp8.h), with
// fast_accum choosing Hopper's FP8 fast accumulation. Throws BackendError when no device can be used.
std::unique_ptr<Backend> make_cuda_backend(bool native, bool fast_accum);

// Timings for drift bench gemm (seconds per call, averaged over calls filling min_seconds).
struct CudaGemmTiming {
  double kernel_s = 0;   // the device matmul on device-resident prepared operands (no copies)
  double call_s = 0;     // the whole backend call: CPU quantization, copies, kernel, copy back
  bool fast = false;     // the float fast kernel ran (else the general element kernel)
};
CudaGemmTiming time_cuda_matmul(const MatView& a, const MatView& b, const MatmulPolicy& policy, double min_seconds);

// cuBLAS fp32 SGEMM (CUBLAS_DEFAULT_MATH: no TF32) on device-resident m x k and k x n operands.
double time_cublas_sgemm(size_t m, size_t n, size_t k, double min_seconds);

}  // namespace drift
