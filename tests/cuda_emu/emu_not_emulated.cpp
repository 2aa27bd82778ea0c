// What the emulator cannot stand in for: cuBLAS and cuBLASLt are NVIDIA's binaries, not drift
// source, so the native FP8 backend and the SGEMM reference say so when asked for.
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/native_fp8.h"

namespace drift {

std::unique_ptr<Backend> make_native_fp8_backend(bool) {
  throw BackendError("cuda-native: cuBLASLt's FP8 GEMM is not emulated (the CUDA emulator runs drift's own kernels)");
}

NativeFp8Algorithm native_fp8_last_algorithm(const Backend&) { return {}; }

// No cuBLASLt to compare, so no architecture to name.
int native_fp8_compute_capability() { return 0; }

double time_cublas_sgemm(size_t, size_t, size_t, double) {
  throw BackendError("cuBLAS SGEMM is not emulated (the CUDA emulator runs drift's own kernels)");
}

}  // namespace drift
