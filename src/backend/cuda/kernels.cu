#include "backend/cuda/kernels.h"

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/launch.h"

namespace drift::cuda {
namespace {

template <bool kCount>
__global__ void element_kernel(ElementPlan plan, double* c, unsigned long long* counts) {
  const uint64_t total = plan.m * plan.n;
  ElementCounts local;
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t i = e / plan.n, j = e % plan.n;
    c[e] = matmul_element(plan, i, j, kCount ? &local : nullptr);
  }
  if (kCount) {
    // Integer sums: the order of the atomic adds cannot change the totals.
    atomicAdd(counts + 0, static_cast<unsigned long long>(local.inner_adds));
    atomicAdd(counts + 1, static_cast<unsigned long long>(local.inner_swamped));
    atomicAdd(counts + 2, static_cast<unsigned long long>(local.outer_adds));
    atomicAdd(counts + 3, static_cast<unsigned long long>(local.outer_swamped));
  }
}

// Tiled fast kernel: a 128 x 128 tile of C per block of 256 threads, 8 x 8 outputs per thread, K in
// steps of 8 through shared memory. Each output still adds its products one fmaf at a time in K
// order and closes each K-block exactly as fast_element does; tiling only decides who loads what.
constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8, kThreads = 256;

__global__ void __launch_bounds__(kThreads) fast_kernel(FastPlan p, double* c, int* nonfinite) {
  __shared__ float As[kBK][kBM];
  __shared__ float Bs[kBK][kBN];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const uint64_t row0 = static_cast<uint64_t>(blockIdx.y) * kBM, col0 = static_cast<uint64_t>(blockIdx.x) * kBN;
  float acc[kTM][kTN], outer[kTM][kTN];
#pragma unroll
  for (int r = 0; r < kTM; ++r)
#pragma unroll
    for (int q = 0; q < kTN; ++q) acc[r][q] = outer[r][q] = 0.0f;
  uint64_t bi = 0;
  uint64_t block_end = p.k < p.kblock ? p.k : p.kblock;
  const int load_row = tid / 2, load_k = (tid % 2) * 4;
  for (uint64_t kt = 0; kt < p.k; kt += kBK) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint64_t kk = kt + load_k + q;
      const uint64_t ra = row0 + load_row, rb = col0 + load_row;
      As[load_k + q][load_row] = (ra < p.m && kk < p.k) ? p.a[ra * p.k + kk] : 0.0f;
      Bs[load_k + q][load_row] = (rb < p.n && kk < p.k) ? p.b[rb * p.k + kk] : 0.0f;
    }
    __syncthreads();
    // Only real products are added (an extra fmaf(0, 0, -0) would turn -0 into +0).
    const int kend = p.k - kt < kBK ? static_cast<int>(p.k - kt) : kBK;
    for (int kk = 0; kk < kend; ++kk) {
      float af[kTM], bf[kTN];
#pragma unroll
      for (int r = 0; r < kTM; ++r) af[r] = As[kk][ty * kTM + r];
#pragma unroll
      for (int q = 0; q < kTN; ++q) bf[q] = Bs[kk][tx * kTN + q];
#pragma unroll
      for (int r = 0; r < kTM; ++r)
#pragma unroll
        for (int q = 0; q < kTN; ++q) acc[r][q] = f32_fma(af[r], bf[q], acc[r][q]);
      if (kt + kk + 1 == block_end) {  // the same for every thread: no divergence
#pragma unroll
        for (int r = 0; r < kTM; ++r) {
          const uint64_t i = row0 + ty * kTM + r;
          const float sa = (p.sa && i < p.m) ? p.sa[i * p.nblocks + bi] : 1.0f;
#pragma unroll
          for (int q = 0; q < kTN; ++q) {
            const uint64_t j = col0 + tx * kTN + q;
            const float sb = (p.sb && j < p.n) ? p.sb[j * p.nblocks + bi] : 1.0f;
            outer[r][q] = fast_block_done(outer[r][q], acc[r][q], p.scaled, sa, sb);
            acc[r][q] = 0.0f;
          }
        }
        ++bi;
        block_end = p.k - block_end < p.kblock ? p.k : block_end + p.kblock;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kTM; ++r)
#pragma unroll
    for (int q = 0; q < kTN; ++q) {
      const uint64_t i = row0 + ty * kTM + r, j = col0 + tx * kTN + q;
      if (i >= p.m || j >= p.n) continue;
      const float y = p.alpha != 1.0f ? f32_mul(outer[r][q], p.alpha) : outer[r][q];
      if (is_nan(y) || is_inf(y)) atomicOr(nonfinite, 1);
      c[i * p.n + j] = fast_output(p, y, i, j);
    }
}

}  // namespace

void launch_element_kernel(const ElementPlan& plan, double* c, unsigned long long* counts, cudaStream_t stream) {
  const uint64_t total = plan.m * plan.n;
  if (total == 0) return;
  constexpr int threads = 128;
  const uint64_t want = (total + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 16 ? want : 65535 * 16);
  if (counts) DRIFT_LAUNCH(element_kernel<true>, blocks, threads, 0, stream)(plan, c, counts);
  else DRIFT_LAUNCH(element_kernel<false>, blocks, threads, 0, stream)(plan, c, nullptr);
  check(cudaGetLastError(), "element kernel launch");
}

void launch_fast_kernel(const FastPlan& plan, double* c, int* nonfinite, cudaStream_t stream) {
  if (plan.m == 0 || plan.n == 0) return;
  const dim3 grid(static_cast<unsigned>((plan.n + kBN - 1) / kBN), static_cast<unsigned>((plan.m + kBM - 1) / kBM));
  DRIFT_LAUNCH(fast_kernel, grid, kThreads, 0, stream)(plan, c, nonfinite);
  check(cudaGetLastError(), "fast kernel launch");
}

}  // namespace drift::cuda
