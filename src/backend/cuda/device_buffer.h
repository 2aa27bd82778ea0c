// Owning device memory and CUDA error checks for the CUDA backend (host code).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "backend/backend.h"

namespace drift::cuda {

// Throws BackendError naming the failed call and the runtime's reason.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw BackendError(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // Grows (never shrinks) to n elements; contents are not kept.
  void resize(size_t n) {
    if (n <= cap_) {
      size_ = n;
      return;
    }
    release();
    check(cudaMalloc(&p_, (n ? n : 1) * sizeof(T)), "cudaMalloc");
    cap_ = size_ = n;
  }
  void upload(const T* src, size_t n) {
    resize(n);
    if (n) check(cudaMemcpy(p_, src, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  void upload(const std::vector<T>& v) { upload(v.data(), v.size()); }
  void download(T* dst, size_t n) const {
    if (n) check(cudaMemcpy(dst, p_, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  T* get() const { return size_ ? p_ : nullptr; }
  size_t size() const { return size_; }

 private:
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    cap_ = size_ = 0;
  }
  T* p_ = nullptr;
  size_t cap_ = 0, size_ = 0;
};

}  // namespace drift::cuda
