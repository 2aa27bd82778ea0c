// The quantizer's scratch memory, owned by the caller and handed down to quantize_into instead of
// hidden per-thread buffers: copies of the operand (k-contiguous, Hadamard-transformed) and, per
// thread of a quantizing pass, one span's (a row, or rows one after another) scaled values, the
// SIMD cast's float input and output and the span's block scales. Everything grows to the largest
// call and is reused, never cleared (every element a pass reads it wrote first), so a caller that
// quantizes often (the matmul engine through MatmulWorkspace, the element-wise sites, the CUDA
// backend's host quantizer) keeps one and pays for its pages once. One workspace serves one
// quantize_into at a time. A call without one (null) uses a fresh workspace of its own: the same
// results, with the allocation in every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// One 1-D block of a row: NaN (a non-finite input: the block is marked NaN, not cast), or the
// multiplier of its elements.
struct QuantRowBlock {
  bool nan = false;
  bool exact = false;  // mult is a power of two
  double mult = 1.0;
};

// What one thread of a quantizing pass works in.
struct QuantizeThreadScratch {
  std::vector<double> scaled;          // one span's scaled values
  std::vector<float> in, out;          // the span cast's float input and output for that span
  std::vector<QuantRowBlock> blocks;   // the span's 1-D blocks, in row order
  std::vector<float> block_amax;       // a float span's block amaxes, from one SIMD pass
  std::vector<uint32_t> block_bad;     //   and each block's NaN/inf count
  std::vector<float> gathered;         // a span of float rows apart in memory, copied together
  std::vector<float> block_mult;       // a span's block multipliers and their inverses, as floats
  std::vector<uint8_t> block_ok;       //   and which blocks the fused scale-and-cast wrote
  // Room for a span of len elements (grown, never shrunk: a call reuses the pages of the last).
  void fit_row(size_t len) {
    if (scaled.size() < len) {
      scaled.resize(len);
      in.resize(len);
      out.resize(len);
    }
  }
};

struct QuantizeWorkspace {
  std::vector<double> staged;          // a double operand stored k-strided, copied k-contiguous
  std::vector<float> staged_f;         // the same for a float operand
  std::vector<double> rotated;         // the operand after the Hadamard transform
  std::vector<QuantizeThreadScratch> threads;  // one per thread of the pass (index: OpenMP thread)
  // At least n per-thread scratches (called by one thread while the others wait).
  void fit_threads(size_t n) {
    if (threads.size() < n) threads.resize(n);
  }
};

}  // namespace drift
