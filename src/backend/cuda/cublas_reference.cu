// cuBLAS fp32 SGEMM as the speed reference of drift bench gemm --backend cuda.
#include <cublas_v2.h>

#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"
#include "backend/timing.h"

namespace drift {

double time_cublas_sgemm(size_t m, size_t n, size_t k, double min_seconds) {
  std::string why;
  if (cuda_device_count(&why) == 0) throw BackendError("cublas sgemm: " + why);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw BackendError("cublasCreate failed");
  // CUBLAS_DEFAULT_MATH never uses TF32 for an fp32 GEMM (that needs CUBLAS_TF32_TENSOR_OP_MATH);
  // set it explicitly so an environment override (NVIDIA_TF32_OVERRIDE aside) cannot change it.
  cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  std::vector<float> ha(m * k), hb(k * n);
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = static_cast<float>((i * 40503u) % 1000) / 1000.0f - 0.5f;
  cuda::DeviceBuffer<float> a, b, c(m * n);
  a.upload(ha);
  b.upload(hb);
  const float alpha = 1.0f, beta = 0.0f;
  auto call = [&] {
    // Row-major C = A*B as column-major C^T = B^T * A^T.
    const cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                         static_cast<int>(k), &alpha, b.get(), static_cast<int>(n), a.get(),
                                         static_cast<int>(k), &beta, c.get(), static_cast<int>(n));
    if (s != CUBLAS_STATUS_SUCCESS) throw BackendError("cublasSgemm failed");
    cuda::check(cudaDeviceSynchronize(), "cublasSgemm");
  };
  const double seconds = seconds_per_call(call, min_seconds);
  cublasDestroy(h);
  return seconds;
}

}  // namespace drift
