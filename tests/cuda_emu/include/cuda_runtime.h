// The CUDA emulator's stand-in for <cuda_runtime.h>: the part of the CUDA runtime and of the device
// language that drift's kernels use, implemented on the CPU (tests/cuda_emu/emulator.h). Compiled
// with this header first on the include path, the unchanged sources of src/backend/cuda/ build with
// g++ and run in CI on a machine without a GPU: every launch runs every thread of every block, with
// __syncthreads and warp shuffles honoured (each thread is a fiber; see emulator.cpp).
//
// What this proves and what it cannot: the kernels' indexing, reductions, atomics, barriers and the
// host code around them (plans, buffers, copies) compute the CPU engine's bits. It cannot show what
// only the device can: nvcc's code generation, the hardware's intrinsics (the host branches of
// arith/hostdevice.h run instead of __fmul_rn and friends), memory races between threads that a
// sequential schedule hides, and speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#define DRIFT_CUDA_EMULATOR 1

// Qualifiers: every function is a host function; shared memory is per OS thread (blocks run one at
// a time on the launching thread, and a block's threads are fibers of that thread).
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

// The running thread's coordinates (set by the emulator's scheduler before each fiber resumes).
extern thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize();
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaMalloc(void** p, size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind);
cudaError_t cudaMemset(void* p, int value, size_t bytes);

namespace drift_emu {

// The order in which blocks, the warps of a block and the lanes of a warp take their turns: forward
// (index order) or reverse. A kernel whose results depend on it has a race.
enum class Schedule { forward, reverse };
void set_schedule(Schedule s);

// Scheduler entry points (emulator.cpp).
void syncthreads();
// __syncthreads that also returns whether any thread's predicate was true.
bool syncthreads_or(bool predicate);
// Deposits this lane's `bytes`-byte value, waits for every lane of the warp, and returns lane
// (own lane + delta)'s value in `out` (the own value past the warp's end).
void shuffle_down(unsigned mask, const void* value, void* out, size_t bytes, unsigned delta);
// Runs body() as every thread of every block of the grid; launch errors become cudaGetLastError's.
void run_grid(dim3 grid, dim3 block, size_t shared_bytes, void (*thunk)(void*), void* body, const char* name);

template <typename... Params>
struct Launch {
  void (*kernel)(Params...);
  dim3 grid, block;
  size_t shared_bytes;
  const char* name;
  template <typename... Args>
  void operator()(Args&&... args) const {
    // Kernel parameters are copied once, as the launch copies them to the device; each thread
    // then receives its own copy, as each thread reads them.
    std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
    struct Body {
      void (*kernel)(Params...);
      std::tuple<std::decay_t<Params>...>* params;
    } body{kernel, &params};
    run_grid(grid, block, shared_bytes,
             [](void* b) {
               auto* self = static_cast<Body*>(b);
               std::apply(self->kernel, *self->params);
             },
             &body, name);
  }
};

template <typename... Params>
Launch<Params...> launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t,
                         const char* name) {
  return Launch<Params...>{kernel, grid, block, shared_bytes, name};
}

}  // namespace drift_emu

// kernel<<<grid, block, shared, stream>>>(args...) as the sources spell it (backend/cuda/launch.h).
#define DRIFT_LAUNCH(kernel, grid, block, shared, stream) \
  ::drift_emu::launch(kernel, dim3(grid), dim3(block), shared, stream, #kernel)

inline void __syncthreads() { drift_emu::syncthreads(); }
inline int __syncthreads_or(int predicate) { return drift_emu::syncthreads_or(predicate != 0) ? 1 : 0; }

template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move up to 8 bytes");
  T out;
  drift_emu::shuffle_down(mask, &value, &out, sizeof(T), delta);
  return out;
}

// Atomics: fibers switch only at barriers, so a read-modify-write is never interleaved.
namespace drift_emu {
template <typename T, typename Update>
T read_modify_write(T* p, Update update) {
  const T old = *p;
  *p = update(old);
  return old;
}
}  // namespace drift_emu
#define DRIFT_EMU_ATOMIC(name, T, expr)                                                     \
  inline T name(T* p, T v) {                                                                \
    return drift_emu::read_modify_write(p, [v](T old) -> T { return expr; });                \
  }
DRIFT_EMU_ATOMIC(atomicAdd, unsigned long long, old + v)
DRIFT_EMU_ATOMIC(atomicAdd, unsigned, old + v)
DRIFT_EMU_ATOMIC(atomicAdd, int, old + v)
DRIFT_EMU_ATOMIC(atomicMax, unsigned long long, v > old ? v : old)
DRIFT_EMU_ATOMIC(atomicMax, int, v > old ? v : old)
DRIFT_EMU_ATOMIC(atomicMin, unsigned long long, v < old ? v : old)
DRIFT_EMU_ATOMIC(atomicMin, int, v < old ? v : old)
DRIFT_EMU_ATOMIC(atomicOr, unsigned, old | v)
DRIFT_EMU_ATOMIC(atomicOr, int, old | v)
#undef DRIFT_EMU_ATOMIC
