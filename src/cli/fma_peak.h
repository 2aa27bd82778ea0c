// This core's fp32 multiply-add rate, measured: the figure that tells a slow phase of a shared
// machine from a slow drift. On a VM the core's floating-point rate can change by 2x from one hour to
// the next (a neighbour on the sibling hyperthread, the host's clock), and every FMA-bound figure
// moves with it: drift's kernels and sgemm alike, but PyTorch's step, much of which is not
// arithmetic, far less. So `drift bench train` and `drift bench gemm` print it beside their ratios.
#pragma once

#include <string>

namespace drift::cli {

// GFLOP/s (two a lane per multiply-add) of 12 independent chains of multiply-adds kept in registers,
// on the calling thread, at the widest SIMD target this CPU runs (fused where the target has FMA): the
// best of timed bursts over at least `min_seconds`.
double fma_peak_gflops(double min_seconds);

// "this core: fp32 multiply-add peak G GFLOP/s a thread (target, lanes)", for a benchmark's header.
std::string fma_peak_line(double gflops);

}  // namespace drift::cli
