// The CUDA emulator itself: the semantics drift's kernels rely on (every thread of a 3-D grid runs
// once with its own indices, __syncthreads orders shared-memory writes before reads, warp shuffles
// move the right lane's value, atomics total exactly) and the misuses it must report instead of
// hiding (a barrier some threads skip, a shuffle after lanes exited, copies outside an allocation,
// a host pointer where a device one belongs, an empty grid). Expected values are stated here, not
// taken from the emulator.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "backend/cuda/launch.h"

namespace {

__global__ void write_coordinates(unsigned* out) {
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  atomicAdd(&out[block * per_block + thread], 1000000u * blockIdx.z + 10000u * blockIdx.y + 100u * blockIdx.x +
                                                  thread);
}

// Each thread writes its slot, then reads its right neighbour's: without a real barrier the threads
// before it would read slots not yet written (0xff... from the emulated cudaMalloc, or stale values).
__global__ void rotate_through_shared(const int* in, int* out) {
  __shared__ int slot[128];
  const unsigned t = threadIdx.x;
  slot[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  const int right = slot[(t + 1) % blockDim.x];
  __syncthreads();  // the next round's writes wait for every read of this round
  slot[t] = 2 * right;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = slot[(t + 1) % blockDim.x];
}

__global__ void warp_sums(const unsigned long long* in, unsigned long long* lane0_sums, unsigned long long* shifted) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long v = in[t];
  shifted[t] = __shfl_down_sync(0xffffffffu, v, 3);
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) lane0_sums[t / 32] = v;
}

__global__ void totals(unsigned long long* sum, int* max, int* min, int* bits) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(sum, static_cast<unsigned long long>(t));
  atomicMax(max, t * 7 % 997);
  atomicMin(min, 500 - t * 7 % 997);
  atomicOr(bits, 1 << (t % 31));
}

// Round r: only thread `voter[r]` (or none, -1) votes true; every thread records what the barrier
// returned. Back-to-back rounds check that one round's result is not the next round's.
__global__ void vote_rounds(const int* voter, int rounds, int* out) {
  for (int r = 0; r < rounds; ++r) {
    const int any = __syncthreads_or(static_cast<int>(threadIdx.x) == voter[r]);
    out[(blockIdx.x * rounds + r) * blockDim.x + threadIdx.x] = any;
  }
}

__global__ void half_the_threads_sync(int* out) {
  if (threadIdx.x % 2 == 0) __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void shuffle_after_exit(unsigned long long* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1ull, 1);
}

// A race: every thread stores to the same word; the last writer wins.
__global__ void last_writer(unsigned* out) { *out = blockIdx.x * blockDim.x + threadIdx.x; }

template <typename T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  return p;
}

}  // namespace

TEST_CASE("cuda emulator: every thread of a 3-D grid of 3-D blocks runs once, with its own indices") {
  const dim3 grid(3, 2, 2), block(4, 2, 3);
  const size_t n = 12 * 24;
  unsigned* d = device_alloc<unsigned>(n);
  REQUIRE(cudaMemset(d, 0, n * sizeof(unsigned)) == cudaSuccess);
  DRIFT_LAUNCH(write_coordinates, grid, block, 0, nullptr)(d);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<unsigned> h(n);
  REQUIRE(cudaMemcpy(h.data(), d, n * sizeof(unsigned), cudaMemcpyDeviceToHost) == cudaSuccess);
  size_t wrong = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned t = 0; t < 24; ++t) {
          const unsigned b = (bz * 2 + by) * 3 + bx;
          wrong += h[b * 24 + t] != 1000000u * bz + 10000u * by + 100u * bx + t;
        }
  CHECK(wrong == 0);
  cudaFree(d);
}

TEST_CASE("cuda emulator: __syncthreads orders shared-memory writes before reads") {
  const unsigned blocks = 3, threads = 128;
  std::vector<int> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 3 + 1);
  int* din = device_alloc<int>(in.size());
  int* dout = device_alloc<int>(in.size());
  REQUIRE(cudaMemcpy(din, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  DRIFT_LAUNCH(rotate_through_shared, blocks, threads, 0, nullptr)(din, dout);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<int> out(in.size());
  REQUIRE(cudaMemcpy(out.data(), dout, out.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  // out[t] = 2 * in[t + 2] within each block (indices modulo the block).
  size_t wrong = 0;
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < threads; ++t) wrong += out[b * threads + t] != 2 * in[b * threads + (t + 2) % threads];
  CHECK(wrong == 0);
  cudaFree(din);
  cudaFree(dout);
}

TEST_CASE("cuda emulator: __syncthreads_or returns whether any thread of the block voted true") {
  const unsigned blocks = 2, threads = 96;
  const std::vector<int> voter = {-1, 0, 95, -1, 40, -1, -1, 63};
  const int rounds = static_cast<int>(voter.size());
  int* dvoter = device_alloc<int>(voter.size());
  int* dout = device_alloc<int>(blocks * rounds * threads);
  REQUIRE(cudaMemcpy(dvoter, voter.data(), voter.size() * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  DRIFT_LAUNCH(vote_rounds, blocks, threads, 0, nullptr)(dvoter, rounds, dout);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<int> out(blocks * rounds * threads);
  REQUIRE(cudaMemcpy(out.data(), dout, out.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  size_t wrong = 0;
  for (unsigned b = 0; b < blocks; ++b)
    for (int r = 0; r < rounds; ++r)
      for (unsigned t = 0; t < threads; ++t) wrong += (out[(b * rounds + r) * threads + t] != 0) != (voter[r] >= 0);
  CHECK(wrong == 0);
  cudaFree(dvoter);
  cudaFree(dout);
}

TEST_CASE("cuda emulator: warp shuffles move the right lane's value; a warp tree sum totals its lanes") {
  const unsigned blocks = 2, threads = 64, n = blocks * threads;
  std::vector<unsigned long long> in(n);
  for (unsigned i = 0; i < n; ++i) in[i] = (1ull << 40) + i * i;
  auto* din = device_alloc<unsigned long long>(n);
  auto* dsum = device_alloc<unsigned long long>(n / 32);
  auto* dshift = device_alloc<unsigned long long>(n);
  REQUIRE(cudaMemcpy(din, in.data(), n * 8, cudaMemcpyHostToDevice) == cudaSuccess);
  DRIFT_LAUNCH(warp_sums, blocks, threads, 0, nullptr)(din, dsum, dshift);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<unsigned long long> sums(n / 32), shifted(n);
  REQUIRE(cudaMemcpy(sums.data(), dsum, sums.size() * 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(shifted.data(), dshift, n * 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (unsigned w = 0; w < n / 32; ++w) {
    unsigned long long want = 0;
    for (unsigned l = 0; l < 32; ++l) want += in[w * 32 + l];
    CHECK(sums[w] == want);
    for (unsigned l = 0; l < 32; ++l)  // lanes 29..31 have no lane + 3: they keep their own value
      CHECK(shifted[w * 32 + l] == in[w * 32 + (l + 3 < 32 ? l + 3 : l)]);
  }
  cudaFree(din);
  cudaFree(dsum);
  cudaFree(dshift);
}

TEST_CASE("cuda emulator: atomics total exactly") {
  auto* sum = device_alloc<unsigned long long>(1);
  int* ints = device_alloc<int>(3);
  const unsigned long long zero = 0;
  const int start[3] = {-1, 1 << 30, 0};
  REQUIRE(cudaMemcpy(sum, &zero, 8, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(ints, start, sizeof start, cudaMemcpyHostToDevice) == cudaSuccess);
  DRIFT_LAUNCH(totals, 10, 100, 0, nullptr)(sum, ints, ints + 1, ints + 2);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  unsigned long long s = 0;
  int r[3];
  REQUIRE(cudaMemcpy(&s, sum, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(r, ints, sizeof r, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(s == 999ull * 1000 / 2);
  CHECK(r[0] == 996);  // t -> t * 7 % 997 is a bijection on 0..996, so its largest value is 996
  CHECK(r[1] == 500 - 996);
  CHECK(r[2] == 0x7fffffff);  // 1 << 0 .. 1 << 30 all set
  cudaFree(sum);
  cudaFree(ints);
}

TEST_CASE("cuda emulator: kernel misuse is reported as a launch error, not hidden") {
  int* d = device_alloc<int>(64);
  DRIFT_LAUNCH(half_the_threads_sync, 1, 64, 0, nullptr)(d);
  cudaError_t e = cudaGetLastError();
  CHECK(e == cudaErrorLaunchFailure);
  CHECK(std::string(cudaGetErrorString(e)).find("__syncthreads") != std::string::npos);
  CHECK(cudaGetLastError() == cudaSuccess);  // reading the error clears it

  auto* u = device_alloc<unsigned long long>(32);
  DRIFT_LAUNCH(shuffle_after_exit, 1, 32, 0, nullptr)(u);
  e = cudaGetLastError();
  CHECK(e == cudaErrorLaunchFailure);
  CHECK(std::string(cudaGetErrorString(e)).find("exited") != std::string::npos);

  DRIFT_LAUNCH(half_the_threads_sync, 0, 64, 0, nullptr)(d);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  cudaFree(d);
  cudaFree(u);
}

TEST_CASE("cuda emulator: device memory is checked: bounds, pointer kinds, unwritten contents") {
  double* d = device_alloc<double>(4);
  double h[5] = {1, 2, 3, 4, 5};
  double back[4];
  REQUIRE(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (double x : back) CHECK(x != x);  // fresh device memory reads as NaN, never as a plausible 0
  CHECK(cudaMemcpy(d, h, 5 * sizeof(double), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d + 1, h, 4 * sizeof(double), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(h, back, sizeof back, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);  // host as device
  CHECK(cudaMemcpy(d, d, sizeof back, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);      // device as host
  CHECK(cudaMemset(d + 2, 0, 3 * sizeof(double)) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy2D(d, 2 * sizeof(double), h, 3 * sizeof(double), 2 * sizeof(double), 2, cudaMemcpyHostToDevice) ==
        cudaSuccess);
  CHECK(cudaMemcpy2D(d, 2 * sizeof(double), h, 3 * sizeof(double), 2 * sizeof(double), 3, cudaMemcpyHostToDevice) ==
        cudaErrorInvalidValue);
  REQUIRE(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[0] == 1);
  CHECK(back[1] == 2);
  CHECK(back[2] == 4);
  CHECK(back[3] == 5);
  CHECK(cudaFree(d + 1) == cudaErrorInvalidDevicePointer);
  CHECK(cudaFree(d) == cudaSuccess);
}

TEST_CASE("cuda emulator: the schedule can be reversed, which exposes a race") {
  unsigned* d = device_alloc<unsigned>(1);
  unsigned forward = 0, reverse = 0;
  drift_emu::set_schedule(drift_emu::Schedule::forward);
  DRIFT_LAUNCH(last_writer, 3, 64, 0, nullptr)(d);
  REQUIRE(cudaMemcpy(&forward, d, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  drift_emu::set_schedule(drift_emu::Schedule::reverse);
  DRIFT_LAUNCH(last_writer, 3, 64, 0, nullptr)(d);
  REQUIRE(cudaMemcpy(&reverse, d, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  drift_emu::set_schedule(drift_emu::Schedule::forward);
  CHECK(forward == 3 * 64 - 1);  // block 2's last lane ran last
  CHECK(reverse == 0);           // block 0's lane 0 ran last
  cudaFree(d);
}
