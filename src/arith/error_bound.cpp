// The forward-error bound of the matmul engine (docs/diagnostics.md derives each term). Every
// rounding is modelled as round(x) = x (1 + d) + e with |d| <= u and |e| <= eta (rounding_unit);
// a summation tree in which every input passes at most L roundings and which has R roundings in
// all then satisfies |s^ - s| <= ((1 + u)^L - 1) sum|t| + R eta (1 + u)^L.
#include "arith/error_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace drift {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The bound itself is evaluated in double: sums of at most ~2^24 positive terms, each rounded to
// nearest, err by less than a relative 2^-29; this factor absorbs that.
constexpr double kSafety = 1.0 + 0x1p-28;

bool nearest(Rounding r) { return r == Rounding::rne || r == Rounding::rna; }

// (1 + u)^L - 1, rounded up generously (L u is far below 1 in every case that matters).
double growth(double u, double L) { return std::expm1(L * std::log1p(u)) * (1 + 0x1p-40); }

// The summation tree of an accumulator: the longest chain of roundings an input passes (L) and
// the number of roundings (R), for n inputs summed from +0 (matmul_reference.cpp's ordered_sum).
void tree_shape(const Accumulator& acc, size_t n, double* L, double* R) {
  const double dn = static_cast<double>(n);
  switch (acc.order) {
    case SumOrder::sequential:
    case SumOrder::reverse:
    case SumOrder::permuted:
      *L = dn;
      *R = dn;
      return;
    case SumOrder::pairwise: {
      int depth = 0;
      while ((size_t{1} << depth) < n) ++depth;
      *L = depth + 1;  // the leaf's add(0, t) plus one add per level
      *R = n ? 2 * dn - 1 : 0;
      return;
    }
    case SumOrder::split:
    case SumOrder::splitk: {  // ceil(n/p) adds in the longest partial sum, then p - 1 joins
      const size_t p = static_cast<size_t>(std::max(1, acc.split));
      *L = static_cast<double>((n + p - 1) / p + p - 1);
      *R = dn + static_cast<double>(p - 1);
      return;
    }
  }
  *L = *R = dn;
}

// Bound on |sum^ - sum| for n inputs with sum of magnitudes `abs_sum`.
double sum_bound(double abs_sum, size_t n, const Accumulator& acc) {
  if (n == 0) return 0;
  double L, R;
  tree_shape(acc, n, &L, &R);
  const RoundingUnit U = rounding_unit(acc.format, acc.round);
  const double g = growth(U.u, L);
  return g * abs_sum + R * U.eta * (1 + g);
}

// 2^(exponent of the leading bit) of a finite non-zero x.
double lead_pow2(double x) {
  int e;
  std::frexp(x, &e);
  return std::ldexp(1.0, e - 1);
}

// One fused group of the tensor-core model (fused_accum.h): terms idx[0..n) of a and b, c the
// chained value with |c_exact| <= P and |c - c_exact| <= B on entry. Updates P and B.
void fused_group_bound(const double* a, const double* b, const size_t* idx, size_t n, const FusedModel& m, double& P,
                       double& B) {
  const double in_min = std::ldexp(1.0, m.in_emin);
  double emax = 0, dropped = 0, group_abs = 0;
  for (size_t t = 0; t < n; ++t) {
    const double x = a[idx[t]], y = b[idx[t]];
    if (x == 0 || y == 0) continue;
    const double p = std::fabs(x * y);
    group_abs += p;
    if (!m.in_subnormals && (std::fabs(x) < in_min || std::fabs(y) < in_min)) {
      dropped += p;  // read as zero: the whole product is the error
      continue;
    }
    emax = std::max(emax, std::max(lead_pow2(x), in_min) * std::max(lead_pow2(y), in_min));
  }
  // The alignment exponent E: 2^E <= the largest of the products' 2^(ex+ey), c's 2^lead (clamped
  // to the output's emin), and the model's lower clamp.
  const double c_mag = P + B;
  double e_hi = emax;
  if (m.align_includes_acc && c_mag > 0) e_hi = std::max(e_hi, std::max(c_mag, std::ldexp(1.0, m.out.emin)));
  if (m.min_align_exp != kNoMinAlignExp) e_hi = std::max(e_hi, std::ldexp(1.0, m.min_align_exp));
  // Each cut term (and c when aligned) loses less than one unit of the last kept bit 2^(E - kept_bits).
  const double trunc = static_cast<double>(n + 1) * std::ldexp(e_hi, -m.kept_bits) + dropped;
  P += group_abs;
  // One rounding of the exact group sum to out_man_bits fraction bits (subnormals kept or flushed).
  const double u = std::ldexp(1.0, -m.out_man_bits - (nearest(m.final_rounding) ? 1 : 0));
  const double eta = m.out_subnormals ? std::ldexp(1.0, m.out.emin - m.out_man_bits) : 2 * m.out.min_normal;
  B = B + trunc + u * (P + B + trunc) + eta;
}

// A chain of fused groups from c = 0 over products [0, len) of a and b (fused_chain_strided).
void fused_chain_bound(const double* a, const double* b, size_t len, const FusedModel& m, double& P, double& B) {
  P = 0, B = 0;
  std::vector<size_t> idx;
  const size_t terms = static_cast<size_t>(m.terms);
  if (m.interleave > 0) {
    const size_t r = static_cast<size_t>(m.interleave), block = 2 * terms;
    for (size_t s = 0; s < len; s += block) {
      const size_t l = std::min(block, len - s);
      for (size_t h = 0; h < 2; ++h) {
        idx.clear();
        for (size_t i = 0; i < l; ++i)
          if ((i / r) % 2 == h) idx.push_back(s + i);
        fused_group_bound(a, b, idx.data(), idx.size(), m, P, B);
      }
    }
    return;
  }
  for (size_t s = 0; s < len; s += terms) {
    const size_t l = std::min(terms, len - s);
    idx.resize(l);
    for (size_t i = 0; i < l; ++i) idx[i] = s + i;
    fused_group_bound(a, b, idx.data(), l, m, P, B);
  }
}

// The fused dot product from 0 (fused_dot_strided): one chain, or chains of promote_every products
// each added into an IEEE rne accumulator of the output format.
double fused_dot_bound(const double* a, const double* b, size_t len, const FusedModel& m) {
  if (m.promote_every <= 0) {
    double P, B;
    fused_chain_bound(a, b, len, m, P, B);
    return B;
  }
  RoundSpec rne;
  rne.subnormals = m.out_subnormals ? Subnormals::keep : Subnormals::flush;
  const RoundingUnit U = rounding_unit(m.out, rne);
  double total_P = 0, total_B = 0;
  const size_t pe = static_cast<size_t>(m.promote_every);
  for (size_t s = 0; s < len; s += pe) {
    double P, B;
    fused_chain_bound(a + s, b + s, std::min(pe, len - s), m, P, B);
    total_P += P;
    total_B = total_B + B + U.u * (total_P + total_B + B) + U.eta;
  }
  return total_B;
}

}  // namespace

RoundingUnit rounding_unit(const Format& f, const RoundSpec& r) {
  RoundingUnit U;
  U.u = std::ldexp(1.0, -f.quantum_mant - (nearest(r.mode) ? 1 : 0));
  // Below the normal range the spacing is 2^quantum_min: an absolute error under one spacing; a
  // flushing format loses up to its smallest normal (twice that covers rounding up to it first).
  U.eta = flushes(f, r) && f.min_normal > 0 ? 2 * f.min_normal : std::ldexp(1.0, f.quantum_min);
  return U;
}

MatmulErrorBound matmul_error_bound(const PreparedOperands& ops, const MatmulPolicy& policy) {
  const QuantizedOperand& A = ops.a;
  const QuantizedOperand& Bq = ops.b;
  const size_t m = A.rows, n = Bq.rows, k = A.k, kb = ops.kblock;
  const size_t nblocks = k == 0 ? 0 : (k + kb - 1) / kb;
  MatmulErrorBound r;
  r.m = m, r.n = n;
  r.bound.assign(m * n, 0.0);
  r.exact.assign(m * n, 0.0);
  const bool scaled = A.block_k || Bq.block_k;
  const RoundingUnit Uo = rounding_unit(policy.outer.format, policy.outer.round);
  const RoundingUnit Uout = rounding_unit(policy.out_format, policy.out_round);
  const double alpha = A.tensor_scale * Bq.tensor_scale;  // exact: both are doubles of <= 24 bits
  const bool has_alpha = alpha != 1.0;
  const double omax = policy.outer.format.max_finite, imax = policy.inner.format.max_finite;
  const double pmax = policy.product_format ? policy.product_format->max_finite : kInf;
  const RoundingUnit Up = policy.product_format ? rounding_unit(*policy.product_format, policy.product_round) : RoundingUnit{};
  const double fmax = policy.inner.fused ? policy.inner.fused->out.max_finite : kInf;
  const double u64 = 0x1p-53, eta64 = 0x1p-1074;

  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      const double* a = A.q.data() + i * k;
      const double* b = Bq.q.data() + j * k;
      bool finite = true;
      double sum_abs = 0, sum_err = 0, exact = 0, exact_abs = 0, max_scale = 1;
      for (size_t bi = 0; bi < nblocks; ++bi) {
        const size_t k0 = bi * kb, len = std::min(kb, k - k0);
        double P = 0, X = 0, pmag = 0;
        for (size_t t = 0; t < len; ++t) {
          const double p = a[k0 + t] * b[k0 + t];
          P += std::fabs(p);
          X += p;
          pmag = std::max(pmag, std::fabs(p));
        }
        if (!std::isfinite(P)) finite = false;
        // The inner sum's error Bb.
        double Bb;
        if (policy.inner.fused) {
          Bb = fused_dot_bound(a + k0, b + k0, len, *policy.inner.fused);
          if (P + Bb >= fmax) finite = false;
        } else {
          double terms_abs = P, prod_err = 0;
          if (policy.product_format) {
            prod_err = Up.u * P + static_cast<double>(len) * Up.eta;
            terms_abs = P + prod_err;
            if (pmag >= pmax) finite = false;
          }
          Bb = prod_err + sum_bound(terms_abs, len, policy.inner);
          if (P + Bb >= imax) finite = false;
        }
        const double I = P + Bb;  // |inner sum| <= I
        double S = 1, Ss = 1, T = Bb, Amag = I;
        if (scaled) {
          const double sa = A.block_k ? A.block_scale[i * A.blocks_per_row + k0 / A.block_k] : 1.0;
          const double sb = Bq.block_k ? Bq.block_scale[j * Bq.blocks_per_row + k0 / Bq.block_k] : 1.0;
          Ss = sa * sb;  // exact in double: scales have at most 24 significand bits
          S = std::fabs(Ss);
          const double s_hat = S * (1 + Uo.u) + Uo.eta;
          // t = o(I^ s^): |t - S X| <= u|I^||s^| + eta + |I^||s^ - S| + S |I^ - X|
          T = Uo.u * I * s_hat + Uo.eta + I * (Uo.u * S + Uo.eta) + S * Bb;
          Amag = S * P + T;
          if (s_hat >= omax || Amag >= omax) finite = false;
          max_scale = std::max(max_scale, S);
        }
        sum_abs += Amag;
        sum_err += T;
        exact += Ss * X;
        exact_abs += S * P;
      }
      // The outer sum over blocks, then alpha.
      double err = sum_err + sum_bound(sum_abs, nblocks, policy.outer);
      double mag = exact_abs + err;
      if (mag >= omax) finite = false;
      if (has_alpha) {
        const double al = std::fabs(alpha), a_hat = al * (1 + Uo.u) + Uo.eta;
        err = Uo.u * mag * a_hat + Uo.eta + mag * (Uo.u * al + Uo.eta) + al * err;
        mag = al * exact_abs + err;
        if (mag >= omax) finite = false;
        exact *= alpha;
        exact_abs *= al;
        max_scale *= std::max(1.0, al);
      }
      // Output rounding.
      err += Uout.u * mag + Uout.eta;
      if (mag >= policy.out_format.max_finite) finite = false;
      // The fp64 evaluation of E: K products, K + nblocks adds, two scale multiplies per block and alpha.
      const double ops64 = static_cast<double>(k + 3 * nblocks + 4);
      err += growth(u64, ops64) * exact_abs + ops64 * eta64 * max_scale;
      r.exact[i * n + j] = exact;
      r.bound[i * n + j] = finite && std::isfinite(err) && std::isfinite(exact) ? err * kSafety : kInf;
    }
  return r;
}

BoundCheck check_matmul_bound(const PreparedOperands& ops, const MatmulPolicy& policy, const double* c, size_t ldc) {
  const MatmulErrorBound eb = matmul_error_bound(ops, policy);
  BoundCheck chk;
  for (size_t i = 0; i < eb.m; ++i)
    for (size_t j = 0; j < eb.n; ++j) {
      const double bound = eb.bound[i * eb.n + j], cij = c[i * ldc + j];
      if (!std::isfinite(bound) || !std::isfinite(cij)) {
        ++chk.unchecked;
        continue;
      }
      ++chk.checked;
      const double dev = std::fabs(cij - eb.exact[i * eb.n + j]);
      if (dev > bound) ++chk.violations;
      const double ratio = bound > 0 ? dev / bound : (dev > 0 ? kInf : 0.0);
      chk.max_ratio = std::max(chk.max_ratio, ratio);
    }
  return chk;
}

}  // namespace drift
