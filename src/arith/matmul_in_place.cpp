#include "arith/matmul_in_place.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "arith/cast_span.h"  // is_fp32_grid_kept
#include "arith/parallel.h"

namespace drift {

bool is_identity_quantizer(const Quantizer& q) {
  return !scale_kind_traits(q.scaling.kind).scaled() && q.scaling.hadamard == 0 && is_fp32_grid_kept(q.format, q.round);
}

bool in_place_operand(const MatViewF& v, bool as_b, QuantizedOperand& q, InPlaceOperand& out, InPlaceScan scan) {
  // Stored shape (rows x cols, row stride ld) whatever the canonical orientation.
  const size_t sr = v.transposed ? v.cols : v.rows, sc = v.transposed ? v.rows : v.cols;
  double top = 0, low = INFINITY;
  uint64_t bad = 0, sub = 0;
  // Row chunks on a team for a large operand (extrema and counts: the same in any split).
  const size_t chunks = worth_threads_elements(sr * sc) ? std::max<size_t>(1, std::min<size_t>(sr, 64)) : 1;
  auto scan_chunk = [&](size_t ci) {
    const size_t r0 = sr * ci / chunks, r1 = sr * (ci + 1) / chunks;
    return scan_floats(v.data + r0 * v.ld, r1 - r0, sc, v.ld);
  };
  if (scan == InPlaceScan::none) {
    top = INFINITY, low = 0;
  } else if (chunks == 1) {
    const FloatScan s = scan_chunk(0);
    top = s.max, low = s.min_nonzero, bad = s.nonfinite, sub = s.subnormal;
  } else {
#pragma omp parallel for schedule(static) reduction(max : top) reduction(min : low) reduction(+ : bad, sub)
    for (size_t ci = 0; ci < chunks; ++ci) {
      const FloatScan s = scan_chunk(ci);
      top = std::max(top, s.max);
      low = std::min(low, s.min_nonzero);
      bad += s.nonfinite;
      sub += s.subnormal;
    }
  }
  if (bad) return false;  // NaN or inf: the ordinary route (its fast path then defers to the reference)
  // The canonical operand: A is M x K, B is N x K (its element (j, t) is B[t][j]).
  const bool k_contiguous = as_b ? v.transposed : !v.transposed;
  out.p = v.data;
  out.rs = k_contiguous ? v.ld : 1;
  out.cs = k_contiguous ? 1 : v.ld;
  out.max = top;
  out.min_nonzero = low;
  // What quantize_into records for an identity quantization of finite values: nothing clips,
  // flushes or is scaled; the subnormals are counted as they are.
  q.reset_unscaled(as_b ? v.cols : v.rows, as_b ? v.rows : v.cols);
  q.in_float = false;
  q.q.clear();
  q.stats.elements = sr * sc;
  q.stats.subnormal = sub;
  q.stats.amax = scan == InPlaceScan::none ? 0 : out.max;
  return true;
}

}  // namespace drift
