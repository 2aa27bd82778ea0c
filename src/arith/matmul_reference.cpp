// The literal implementation of the matmul definition in matmul.h: one output element at a time,
// every rounding through the scalar core. Slow on purpose; the fast paths are tested against it.
#include <algorithm>
#include <numeric>
#include <vector>

#include "arith/matmul.h"
#include "arith/ops.h"
#include "arith/matmul_random.h"

namespace drift {
namespace {

// Rounds sums for one output element, counting swamping, drawing sr bits by a running counter.
struct Summer {
  const Accumulator& acc;
  uint64_t seed, stream, base;  // element (i, j)'s random words start at index `base`
  uint64_t* adds;
  uint64_t* swamped;
  uint64_t counter = 0;
  double add(double x, double y) {
    const uint32_t rnd = acc.round.mode == Rounding::sr ? random_u32(seed, stream, base + counter) : 0;
    ++counter;
    const double r = op_add(x, y, acc.format, acc.round, rnd);
    ++*adds;
    if ((y != 0 && r == x) || (x != 0 && r == y)) ++*swamped;
    return r;
  }
};

// Sum of terms t[idx[0..n)] in the accumulator's order.
double ordered_sum(const std::vector<double>& t, const std::vector<size_t>& idx, Summer& s) {
  const size_t n = idx.size();
  switch (s.acc.order) {
    case SumOrder::sequential:
    case SumOrder::permuted: {  // idx already permuted by the caller
      double acc = 0.0;
      for (size_t i = 0; i < n; ++i) acc = s.add(acc, t[idx[i]]);
      return acc;
    }
    case SumOrder::reverse: {
      double acc = 0.0;
      for (size_t i = n; i-- > 0;) acc = s.add(acc, t[idx[i]]);
      return acc;
    }
    case SumOrder::pairwise: {
      if (n == 0) return 0.0;
      struct Rec {
        static double sum(const std::vector<double>& t, const std::vector<size_t>& idx, size_t lo, size_t hi, Summer& s) {
          if (hi - lo == 1) return s.add(0.0, t[idx[lo]]);
          const size_t mid = lo + (hi - lo) / 2;
          const double left = sum(t, idx, lo, mid, s);
          const double right = sum(t, idx, mid, hi, s);
          return s.add(left, right);
        }
      };
      return Rec::sum(t, idx, 0, n, s);
    }
    case SumOrder::split:
    case SumOrder::splitk: {  // term i joins partial i mod parts (split) or i / ceil(n/parts) (splitk)
      const size_t parts = static_cast<size_t>(std::max(1, s.acc.split));
      const size_t per_part = (n + parts - 1) / parts;
      const bool contiguous = s.acc.order == SumOrder::splitk;
      std::vector<double> partial(parts, 0.0);
      for (size_t i = 0; i < n; ++i) {
        const size_t p = contiguous ? i / per_part : i % parts;
        partial[p] = s.add(partial[p], t[idx[i]]);
      }
      double acc = partial[0];
      for (size_t p = 1; p < parts; ++p) acc = s.add(acc, partial[p]);
      return acc;
    }
  }
  return 0.0;
}

// A seeded permutation of [0, n) for block `block` of this call (Fisher-Yates on Philox words).
std::vector<size_t> block_order(size_t n, const Accumulator& acc, uint64_t seed, uint64_t stream, uint64_t block) {
  std::vector<size_t> idx(n);
  fill_block_order(idx.data(), n, acc.order == SumOrder::permuted && !acc.fused, seed, stream, block);
  return idx;
}

}  // namespace

void matmul_reference(const PreparedOperands& ops, double* c, size_t ldc, const MatmulPolicy& policy,
                      const MatmulContext& ctx, MatmulTelemetry& tel) {
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& B = ops.b;
  const size_t m = A.rows, n = B.rows, k = A.k;
  const size_t kb = ops.kblock;
  const size_t nblocks = k == 0 ? 0 : (k + kb - 1) / kb;
  const uint64_t per_elem = matmul_words_per_element(k, nblocks);
  const Format& of = policy.outer.format;
  const RoundSpec& oround = policy.outer.round;
  const double alpha = A.tensor_scale * B.tensor_scale == 1.0
                           ? 1.0
                           : op_mul(A.tensor_scale, B.tensor_scale, of, oround);

  // Block orders are per call, shared by all elements.
  std::vector<std::vector<size_t>> orders(nblocks);
  for (size_t bi = 0; bi < nblocks; ++bi)
    orders[bi] = block_order(std::min(kb, k - bi * kb), policy.inner, ctx.seed, ctx.stream ^ (kStreamPerm << 56), bi);
  std::vector<size_t> outer_idx(nblocks);
  std::iota(outer_idx.begin(), outer_idx.end(), size_t{0});
  if (policy.outer.order == SumOrder::permuted) outer_idx = block_order(nblocks, policy.outer, ctx.seed, ctx.stream ^ (kStreamPerm << 56), kOuterOrderBlock);

  uint64_t inner_adds = 0, inner_sw = 0, outer_adds = 0, outer_sw = 0;
#pragma omp parallel for schedule(static) reduction(+ : inner_adds, inner_sw, outer_adds, outer_sw)
  for (size_t i = 0; i < m; ++i) {
    std::vector<double> terms, block_terms(nblocks);
    for (size_t j = 0; j < n; ++j) {
      const uint64_t base = (i * n + j) * per_elem;
      Summer inner{policy.inner, ctx.seed, ctx.stream ^ (kStreamInner << 56), base, &inner_adds, &inner_sw};
      Summer outer{policy.outer, ctx.seed, ctx.stream ^ (kStreamOuter << 56), base, &outer_adds, &outer_sw};
      uint64_t prod_counter = 0;
      for (size_t bi = 0; bi < nblocks; ++bi) {
        const size_t k0 = bi * kb, len = std::min(kb, k - k0);
        double inner_sum;
        if (policy.inner.fused) {
          inner_sum = fused_dot(0.0, A.q.data() + i * k + k0, B.q.data() + j * k + k0, static_cast<int>(len),
                                *policy.inner.fused);
          inner_adds += len;
        } else {
          terms.resize(len);
          for (size_t t = 0; t < len; ++t) {
            const double x = A.q[i * k + k0 + t], y = B.q[j * k + k0 + t];
            if (policy.product_format) {
              const uint32_t rnd = policy.product_round.mode == Rounding::sr
                                       ? random_u32(ctx.seed, ctx.stream ^ (kStreamProduct << 56), base + prod_counter++)
                                       : 0;
              terms[t] = op_mul(x, y, *policy.product_format, policy.product_round, rnd);
            } else {
              terms[t] = x * y;  // exact: operand formats are at most 26 significand bits (validate_policy)
            }
          }
          inner_sum = ordered_sum(terms, orders[bi], inner);
        }
        // Scale application: both block scales, multiplied in the outer format, then the inner sum.
        const double sa = A.block_k ? A.block_scale[i * A.blocks_per_row + k0 / A.block_k] : 1.0;
        const double sb = B.block_k ? B.block_scale[j * B.blocks_per_row + k0 / B.block_k] : 1.0;
        double t = inner_sum;
        if (A.block_k || B.block_k) {  // block-scaled operands: every block is scaled, scale 1 included
          const double s = op_mul(sa, sb, of, oround);
          const uint32_t rnd = oround.mode == Rounding::sr
                                   ? random_u32(ctx.seed, ctx.stream ^ (kStreamScale << 56), base + bi)
                                   : 0;
          t = op_mul(inner_sum, s, of, oround, rnd);
        }
        block_terms[bi] = t;
      }
      double y = ordered_sum(block_terms, outer_idx, outer);
      if (alpha != 1.0) y = op_mul(y, alpha, of, oround);
      const uint32_t rnd = policy.out_round.mode == Rounding::sr
                               ? random_u32(ctx.seed, ctx.stream ^ (kStreamOut << 56), i * n + j)
                               : 0;
      c[i * ldc + j] = round_to(y, policy.out_format, policy.out_round, rnd);
    }
  }
  tel.inner_adds += inner_adds;
  tel.inner_swamped += inner_sw;
  tel.outer_adds += outer_adds;
  tel.outer_swamped += outer_sw;
}

}  // namespace drift
