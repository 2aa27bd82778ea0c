// When a loop of the engine is worth an OpenMP team. Starting a team costs microseconds (more with
// more threads), which is more than a small call's whole work: training makes thousands of small
// matmuls per step (attention's per-head products). Below these sizes a loop runs on the calling
// thread. Every parallel loop of the engine splits fixed work items whose results and counts do
// not depend on which thread runs them, so this changes speed only, never a bit.
#pragma once

#include <algorithm>
#include <cstddef>

namespace drift {

// Elements of an elementwise pass (quantization, packing, output rounding).
constexpr size_t kParallelMinElements = size_t{1} << 16;
// Multiply-adds of a matmul kernel.
constexpr size_t kParallelMinProducts = size_t{1} << 19;

inline bool worth_threads_elements(size_t n) { return n >= kParallelMinElements; }
inline bool worth_threads_products(size_t n) { return n >= kParallelMinProducts; }

// body(i) for i in [0, n): statically split over an OpenMP team when `parallel`, else a plain loop
// on this thread that never enters OpenMP (a region with if(false) still costs a runtime call:
// about 2% of an attention step, whose per-head products are small calls).
template <typename Body>
void for_each_index(size_t n, bool parallel, Body&& body) {
  if (parallel) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) body(i);
  } else {
    for (size_t i = 0; i < n; ++i) body(i);
  }
}

// fn(begin, len) for the consecutive chunks of [0, n), `chunk` elements each but the last, split
// over a team when `parallel` (for_each_index over the chunks).
template <typename Fn>
void for_each_chunk(size_t n, size_t chunk, bool parallel, Fn&& fn) {
  for_each_index((n + chunk - 1) / chunk, parallel, [&](size_t c) { fn(c * chunk, std::min(chunk, n - c * chunk)); });
}

}  // namespace drift
