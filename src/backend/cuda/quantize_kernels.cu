#include "backend/cuda/quantize_kernels.h"

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/launch.h"

namespace drift::cuda {
namespace {

constexpr int kThreads = 256;

// Grid for n items, grid-stride beyond 2^20 blocks.
unsigned grid_for(uint64_t n) {
  const uint64_t want = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(want < 65535 * 16 ? want : 65535 * 16);
}

// Launches a grid-stride kernel over n items (nothing for none) and reports a failed launch as `what`.
template <typename... Params, typename... Args>
void launch_over(uint64_t n, const char* what, cudaStream_t stream, void (*kernel)(Params...), Args... args) {
  if (n == 0) return;
  DRIFT_LAUNCH(kernel, grid_for(n), kThreads, 0, stream)(args...);
  check(cudaGetLastError(), what);
}

__device__ unsigned long long warp_sum(unsigned long long v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
__device__ unsigned long long warp_max(unsigned long long v) {
  for (int o = 16; o > 0; o /= 2) {
    const unsigned long long w = __shfl_down_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// Adds one thread's counts: reduced over the warp (every thread of the block reaches this; block
// sizes are multiples of 32), then one atomic per non-zero total from lane 0.
__device__ void add_counts(QuantCounts* c, unsigned long long clipped, unsigned long long flushed,
                           unsigned long long subnormal, unsigned long long nonfinite_values,
                           const InputCounts& in) {
  clipped = warp_sum(clipped);
  flushed = warp_sum(flushed);
  subnormal = warp_sum(subnormal);
  nonfinite_values = warp_sum(nonfinite_values);
  const unsigned long long nonfinite = warp_sum(in.nonfinite);
  const unsigned long long amax_bits = warp_max(bits_of(in.amax));
  if ((threadIdx.x & 31) != 0) return;
  if (clipped) atomicAdd(&c->clipped, clipped);
  if (flushed) atomicAdd(&c->flushed, flushed);
  if (subnormal) atomicAdd(&c->subnormal, subnormal);
  if (nonfinite_values) atomicAdd(&c->nonfinite_values, nonfinite_values);
  if (nonfinite) atomicAdd(&c->nonfinite, nonfinite);
  if (amax_bits) atomicMax(&c->amax_bits, amax_bits);
}

__global__ void tensor_counts_kernel(QuantizePlan p, QuantCounts* counts) {
  const uint64_t n = p.rows * p.k;
  InputCounts in;
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t r, c;
    element_at(p, e, &r, &c);
    in.add(input_at(p, r, c));
  }
  add_counts(counts, 0, 0, 0, 0, in);
}

__global__ void row_block_counts_kernel(QuantizePlan p, QuantCounts* counts) {
  const uint64_t n = p.rows * p.blocks_per_row;
  InputCounts in;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t r, bi;
    row_block_at(p, i, &r, &bi);
    const InputCounts b = row_block_counts(p, r, bi);
    in.nonfinite += b.nonfinite;
    if (b.amax > in.amax) in.amax = b.amax;
  }
  add_counts(counts, 0, 0, 0, 0, in);
}

__global__ void region_scales_kernel(QuantizePlan p, QuantCounts* counts) {
  const uint64_t n = region_count(p);
  for (uint64_t g = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; g < n;
       g += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    int e;
    if (!region_scale_step(p, g, &e)) continue;
    // One scale: as add_scale_exponent (quantize_plan.cpp) adds it on the host.
    atomicAdd(&counts->scale_count, 1ull);
    atomicAdd(reinterpret_cast<unsigned long long*>(&counts->scale_exp_sum),
              static_cast<unsigned long long>(static_cast<long long>(e)));  // two's complement: a signed sum
    atomicMin(&counts->scale_exp_min, e);
    atomicMax(&counts->scale_exp_max, e);
    const int h = e < -QuantCounts::kHistOffset ? -QuantCounts::kHistOffset
                                                : (e > QuantCounts::kHistOffset ? QuantCounts::kHistOffset : e);
    atomicAdd(&counts->scale_exp_hist[h + QuantCounts::kHistOffset], 1ull);
  }
}

__global__ void quantize_elements_kernel(QuantizePlan p, QuantCounts* counts) {
  const uint64_t n = p.rows * p.k;
  unsigned long long clipped = 0, flushed = 0, subnormal = 0, nonfinite_values = 0;
  InputCounts in;
  for (uint64_t e = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t r, c;
    element_at(p, e, &r, &c);
    double v;
    const uint8_t f = quantize_step(p, r, c, &v);
    clipped += (f & kElemClipped) ? 1 : 0;
    flushed += (f & kElemFlushed) ? 1 : 0;
    subnormal += (f & kElemSubnormal) ? 1 : 0;
    nonfinite_values += (f & kElemNonfiniteValue) ? 1 : 0;
    if (p.count_in_pass3) in.add(v);
  }
  add_counts(counts, clipped, flushed, subnormal, nonfinite_values, in);
}

__global__ void hadamard_kernel(HadamardPlan p) {
  const uint64_t per_row = hadamard_groups_per_row(p), n = p.rows * per_row;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    hadamard_step(p, i / per_row, i % per_row);
}

__global__ void widen_kernel(const float* in, double* out, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

__global__ void kblock_scales_kernel(const double* s, uint64_t rows, uint64_t bpr, uint64_t block_k,
                                     uint64_t nblocks, uint64_t kblock, float* out) {
  const uint64_t n = rows * nblocks;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = i / nblocks, bi = i % nblocks;
    out[i] = static_cast<float>(s[r * bpr + bi * kblock / block_k]);
  }
}

}  // namespace

void launch_tensor_counts(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream) {
  launch_over(p.rows * p.k, "tensor counts kernel launch", stream, tensor_counts_kernel, p, counts);
}

void launch_row_block_counts(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream) {
  launch_over(p.rows * p.blocks_per_row, "row block counts kernel launch", stream, row_block_counts_kernel, p, counts);
}

void launch_region_scales(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream) {
  launch_over(p.blocks_per_row ? region_count(p) : 0, "region scales kernel launch", stream, region_scales_kernel, p,
              counts);
}

void launch_quantize_elements(const QuantizePlan& p, QuantCounts* counts, cudaStream_t stream) {
  launch_over(p.rows * p.k, "quantize kernel launch", stream, quantize_elements_kernel, p, counts);
}

void launch_hadamard(const HadamardPlan& p, cudaStream_t stream) {
  launch_over(p.rows * hadamard_groups_per_row(p), "hadamard kernel launch", stream, hadamard_kernel, p);
}

void launch_widen(const float* in, double* out, uint64_t n, cudaStream_t stream) {
  launch_over(n, "widen kernel launch", stream, widen_kernel, in, out, n);
}

void launch_kblock_scales(const double* block_scale, uint64_t rows, uint64_t blocks_per_row, uint64_t block_k,
                          uint64_t nblocks, uint64_t kblock, float* out, cudaStream_t stream) {
  launch_over(rows * nblocks, "block scales kernel launch", stream, kblock_scales_kernel, block_scale, rows,
              blocks_per_row, block_k, nblocks, kblock, out);
}

}  // namespace drift::cuda
