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

// Tiled kernel for the fused tensor-core models: a 64 x 64 tile of C per block of 256 threads,
// 4 x 4 outputs per thread, the operands' K-tiles (kt doubles of 64 rows each) in shared memory.
// Each output runs matmul_element's arithmetic for a fused inner sum and a sequential outer sum:
// fused_dot over a block's products is the same value taken K-tile by K-tile, carrying its
// running sum c from one tile to the next, because every tile holds whole groups and whole
// promotion chunks (fused_tile_k); tiling only decides who loads what.
constexpr int kFT = 64, kFTM = 4, kFTThreads = 256, kMaxFusedK = 32;

template <bool kCount>
__global__ void __launch_bounds__(kFTThreads)
    fused_tile_kernel(ElementPlan p, int kt, double* c, unsigned long long* counts) {
  __shared__ double As[kFT][kMaxFusedK + 1];  // (+1: rows of B read together fall in different banks)
  __shared__ double Bs[kFT][kMaxFusedK + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const uint64_t row0 = static_cast<uint64_t>(blockIdx.y) * kFT, col0 = static_cast<uint64_t>(blockIdx.x) * kFT;
  ElementCounts local;
  double outer[kFTM][kFTM];
#pragma unroll
  for (int r = 0; r < kFTM; ++r)
#pragma unroll
    for (int q = 0; q < kFTM; ++q) outer[r][q] = 0.0;
  for (uint64_t bi = 0; bi < p.nblocks; ++bi) {
    const uint64_t k0 = bi * p.kblock, len = p.k - k0 < p.kblock ? p.k - k0 : p.kblock;
    double inner[kFTM][kFTM];
#pragma unroll
    for (int r = 0; r < kFTM; ++r)
#pragma unroll
      for (int q = 0; q < kFTM; ++q) inner[r][q] = 0.0;
    for (uint64_t t0 = 0; t0 < len; t0 += kt) {
      const int tl = len - t0 < static_cast<uint64_t>(kt) ? static_cast<int>(len - t0) : kt;
      for (int e = tid; e < kFT * kt; e += kFTThreads) {
        const int r = e / kt, kk = e % kt;
        const uint64_t ra = row0 + r, rb = col0 + r, kg = k0 + t0 + kk;
        As[r][kk] = (ra < p.m && kk < tl) ? p.a[ra * p.k + kg] : 0.0;
        Bs[r][kk] = (rb < p.n && kk < tl) ? p.b[rb * p.k + kg] : 0.0;
      }
      __syncthreads();
      // (Not unrolled: each call inlines the whole fused model; the sums live in local memory.)
#pragma unroll 1
      for (int r = 0; r < kFTM; ++r)
#pragma unroll 1
        for (int q = 0; q < kFTM; ++q)
          inner[r][q] = fused_dot(inner[r][q], As[ty * kFTM + r], Bs[tx * kFTM + q], tl, p.model, p.fused_in_double);
      __syncthreads();
    }
#pragma unroll 1
    for (int r = 0; r < kFTM; ++r)
#pragma unroll 1
      for (int q = 0; q < kFTM; ++q) {
        const uint64_t i = row0 + ty * kFTM + r, j = col0 + tx * kFTM + q;
        if (i >= p.m || j >= p.n) continue;
        const uint64_t base = element_base(p, i, j);
        if (kCount) local.inner_adds += len;
        const double term = block_term_of(p, i, j, bi, inner[r][q], base);
        outer[r][q] = outer_summer(p, base, kCount ? &local : nullptr).add(outer[r][q], term, bi);
      }
  }
#pragma unroll 1
  for (int r = 0; r < kFTM; ++r)
#pragma unroll 1
    for (int q = 0; q < kFTM; ++q) {
      const uint64_t i = row0 + ty * kFTM + r, j = col0 + tx * kFTM + q;
      if (i < p.m && j < p.n) c[i * p.n + j] = element_output(p, i, j, outer[r][q]);
    }
  if (kCount) {
    atomicAdd(counts + 0, static_cast<unsigned long long>(local.inner_adds));
    atomicAdd(counts + 2, static_cast<unsigned long long>(local.outer_adds));
    atomicAdd(counts + 3, static_cast<unsigned long long>(local.outer_swamped));
  }
}

}  // namespace

int fused_tile_k(const ElementPlan& p) {
  if (!p.fused || p.outer.order != SumOrder::sequential || p.outer_order) return 0;
  const FusedModel& m = p.model;
  const int group = m.interleave > 0 ? 2 * m.terms : m.terms;
  if (group <= 0 || group > kMaxFusedK || (m.promote_every > 0 && m.promote_every % group != 0)) return 0;
  const int step = m.promote_every > 0 ? m.promote_every : group;  // a multiple of group
  if (step > kMaxFusedK) return 0;
  return kMaxFusedK / step * step;
}

void launch_fused_tile_kernel(const ElementPlan& plan, int kt, double* c, unsigned long long* counts,
                              cudaStream_t stream) {
  if (plan.m == 0 || plan.n == 0) return;
  const dim3 grid(static_cast<unsigned>((plan.n + kFT - 1) / kFT), static_cast<unsigned>((plan.m + kFT - 1) / kFT));
  if (counts) DRIFT_LAUNCH(fused_tile_kernel<true>, grid, kFTThreads, 0, stream)(plan, kt, c, counts);
  else DRIFT_LAUNCH(fused_tile_kernel<false>, grid, kFTThreads, 0, stream)(plan, kt, c, nullptr);
  check(cudaGetLastError(), "fused tile kernel launch");
}

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
