// Layers, llm.c style: `<layer>_forward` / `<layer>_backward` free functions over raw pointers
// with explicit sizes and every tensor's shape in a comment. T is float in training (elementwise
// work in fp32) and double in the gradient checks. Every matmul goes through MatmulSites (the engine
// under the site's policy); everything else here is plain elementwise arithmetic in T.
// Backward functions ADD into parameter gradients (zeroed once per step) and SET input gradients
// unless they say otherwise. Large elementwise passes split their independent rows or blocks over
// an OpenMP team (for_each_index): each element's arithmetic is the same on any thread, so the
// bits do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "arith/layernorm_sums.h"
#include "arith/parallel.h"
#include "arith/tanh_f64.h"
#include "arith/tanh_fp32.h"
#include "model/elementwise.h"
#include "model/sites.h"
#include "model/softmax_rows.h"

namespace drift {

// out (N,C) = wte[tokens[n]] ; tokens (N), wte (V,C)
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, size_t n, size_t c) {
  for (size_t i = 0; i < n; ++i) {
    const T* row = wte + static_cast<size_t>(tokens[i]) * c;
    for (size_t j = 0; j < c; ++j) out[i * c + j] = row[j];
  }
}

// dwte (V,C) += scatter of dout (N,C) by tokens (N). Sequential in n: a fixed order.
template <typename T>
void embedding_backward(T* dwte, const T* dout, const int32_t* tokens, size_t n, size_t c) {
  for (size_t i = 0; i < n; ++i) {
    T* row = dwte + static_cast<size_t>(tokens[i]) * c;
    for (size_t j = 0; j < c; ++j) row[j] += dout[i * c + j];
  }
}

// out (N,OC) = inp (N,C) · wᵀ + bias ; w (OC,C), bias (OC) or null
template <typename T>
void linear_forward(MatmulSites& s, const LinearSites& site, T* out, const T* inp, const T* w, const T* bias, size_t n,
                    size_t c, size_t oc) {
  s.matmul<T>(site.fwd, n, c, oc, inp, c, false, w, c, true, out, oc, false, WriteC::store);
  if (!bias) return;
  // Rows on a team when the pass is large (each element's add is its own), about 16k elements a chunk.
  const size_t rows = std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(oc, 1));
  for_each_chunk(n, rows, worth_threads_elements(n * oc), [&](size_t i0, size_t len) {
    for (size_t i = i0; i < i0 + len; ++i)
      for (size_t j = 0; j < oc; ++j) out[i * oc + j] += bias[j];
  });
}

// dbias (OC) += the column sums of dout (N, OC), each column's adds in row order: columns in chunks
// on a team when the pass is large (a column's sum is the same on any thread).
template <typename T>
void add_column_sums(T* dbias, const T* dout, size_t n, size_t oc) {
  constexpr size_t kColumns = 256;
  for_each_chunk(oc, kColumns, worth_threads_elements(n * oc), [&](size_t j0, size_t len) {
    for (size_t i = 0; i < n; ++i)
      for (size_t j = j0; j < j0 + len; ++j) dbias[j] += dout[i * oc + j];
  });
}

// dinp (N,C) = dout (N,OC) · w (OC,C)   [grad_input; skipped when dinp is null; added when accumulate]
// dw (OC,C) += (inpᵀ (C,N) · dout (N,OC))ᵀ   [grad_weight; as dw.how says: Model::grad_product]
// dbias (OC) += column sums of dout
template <typename T>
void linear_backward(MatmulSites& s, const LinearSites& site, T* dinp, WriteTo<T> dw, T* dbias, const T* dout,
                     const T* inp, const T* w, size_t n, size_t c, size_t oc, bool accumulate = false) {
  const WriteC into_dinp = accumulate ? WriteC::add : WriteC::store;
  if (dinp) s.matmul<T>(site.gi, n, oc, c, dout, oc, false, w, c, false, dinp, c, false, into_dinp);
  s.matmul<T>(site.gw, c, n, oc, inp, c, true, dout, oc, false, dw.c, c, true, dw.how);
  if (dbias) add_column_sums(dbias, dout, n, oc);
}

// out (N) = tanh(inp (N)) by drift's own tanh, the same bits on every machine: for float
// arith/tanh_fp32.h (computed in double, rounded once; glibc's tanhf is neither correctly rounded nor
// the same across versions), for double (the proxy's teacher, the gradient checks) arith/tanh_f64.h
// (fdlibm's algorithm, whose glibc build differs between CPUs).
template <typename T>
void tanh_forward(T* out, const T* inp, size_t n) {
  constexpr size_t kChunk = 4096;
  for_each_chunk(n, kChunk, worth_threads_elements(n), [&](size_t lo, size_t len) {
    if constexpr (std::is_same_v<T, float>)
      tanh_fp32_span(inp + lo, out + lo, len);
    else
      tanh_f64_span(inp + lo, out + lo, len);
  });
}
// dinp (N) = dout * (1 - out^2)
template <typename T>
void tanh_backward(T* dinp, const T* dout, const T* out, size_t n) {
  for (size_t i = 0; i < n; ++i) dinp[i] = dout[i] * (T(1) - out[i] * out[i]);
}

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// The u of a block of elements are formed first so that tanh_forward takes them as one span.
constexpr size_t kGeluBlock = 256;

template <typename T>
T gelu_u(T x) {
  const T s = static_cast<T>(0.7978845608028654);
  return s * (x + T(0.044715) * x * x * x);
}

// fn(b, len, t) for each block [b, b + len) of at most kGeluBlock elements, t[j] = tanh(u(inp[b + j]))
// (blocks are independent: on a team when the pass is large).
template <typename T, typename Fn>
void for_each_gelu_block(const T* inp, size_t n, Fn fn) {
  for_each_chunk(n, kGeluBlock, worth_threads_elements(n), [&](size_t b, size_t len) {
    T t[kGeluBlock] = {};  // (only [0, len) is read; zeroed to keep the compiler's flow analysis quiet)
    for (size_t j = 0; j < len; ++j) t[j] = gelu_u(inp[b + j]);
    tanh_forward(t, t, len);
    fn(b, len, static_cast<const T*>(t));
  });
}

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n) {
  for_each_gelu_block(inp, n, [&](size_t b, size_t len, const T* t) {
    for (size_t j = 0; j < len; ++j) {
      const T x = inp[b + j];
      out[b + j] = T(0.5) * x * (T(1) + t[j]);
    }
  });
}
template <typename T>
void gelu_backward(T* dinp, const T* dout, const T* inp, size_t n) {
  const T s = static_cast<T>(0.7978845608028654);
  for_each_gelu_block(inp, n, [&](size_t b, size_t len, const T* t) {
    for (size_t j = 0; j < len; ++j) {
      const T x = inp[b + j];
      const T du = s * (T(1) + T(3) * T(0.044715) * x * x);
      dinp[b + j] = dout[b + j] * (T(0.5) * (T(1) + t[j]) + T(0.5) * x * (T(1) - t[j] * t[j]) * du);
    }
  });
}

// A row's layer-norm sums are chains of dependent adds in index order (the definition, in
// arith/layernorm_sums.h), each add waiting on the one before. Rows side by side take their steps
// together, each still adding in its own order: float rows 16 at a time in SIMD lanes, double rows
// (the gradient checks) 8 at a time in scalar code. The same bits either way.
constexpr size_t kLayerNormRows = 16;

// layernorm_stats_rows for `rows` rows from x.
template <typename T>
void layernorm_stats(const T* x, size_t rows, size_t c, T* mean, T* rstd) {
  if constexpr (std::is_same_v<T, float>) {
    layernorm_stats_floats(x, rows, c, mean, rstd);
  } else {
    layernorm_stats_scalar(x, rows, c, mean, rstd);
  }
}

// layernorm_backward_means_rows for `rows` rows from x and dy.
template <typename T>
void layernorm_backward_means(const T* x, const T* dy, const T* w, const T* mean, const T* rstd, size_t rows,
                              size_t c, T* dnorm_mean, T* dnorm_norm_mean) {
  if constexpr (std::is_same_v<T, float>) {
    layernorm_backward_means_floats(x, dy, w, mean, rstd, rows, c, dnorm_mean, dnorm_norm_mean);
  } else {
    layernorm_backward_means_scalar(x, dy, w, mean, rstd, rows, c, dnorm_mean, dnorm_norm_mean);
  }
}

// out (N,C) = (inp - mean) * rstd * w + b ; mean, rstd (N) saved for backward ; w, b (C)
template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, size_t n, size_t c) {
  const size_t groups = (n + kLayerNormRows - 1) / kLayerNormRows;
  for_each_index(groups, worth_threads_elements(n * c), [&](size_t g) {
    const size_t i0 = g * kLayerNormRows, rows = std::min(kLayerNormRows, n - i0);
    layernorm_stats(inp + i0 * c, rows, c, mean + i0, rstd + i0);
    for (size_t i = i0; i < i0 + rows; ++i) {
      const T* x = inp + i * c;
      const T m = mean[i], r = rstd[i];
      for (size_t j = 0; j < c; ++j) out[i * c + j] = (x[j] - m) * r * w[j] + b[j];
    }
  });
}

// dinp (N,C) += ... ; dw, db (C) += ... (llm.c's layernorm_backward)
template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean, const T* rstd,
                        size_t n, size_t c) {
  const bool team = worth_threads_elements(n * c);
  // dinp: rows are independent.
  const size_t groups = (n + kLayerNormRows - 1) / kLayerNormRows;
  for_each_index(groups, team, [&](size_t g) {
    const size_t i0 = g * kLayerNormRows, rows = std::min(kLayerNormRows, n - i0);
    T dnorm_mean[kLayerNormRows], dnorm_norm_mean[kLayerNormRows];
    layernorm_backward_means(inp + i0 * c, dout + i0 * c, w, mean + i0, rstd + i0, rows, c, dnorm_mean,
                             dnorm_norm_mean);
    for (size_t r = 0; r < rows; ++r) {
      const size_t i = i0 + r;
      const T* x = inp + i * c;
      const T* dy = dout + i * c;
      for (size_t j = 0; j < c; ++j) {
        const T norm = (x[j] - mean[i]) * rstd[i];
        const T dnorm = w[j] * dy[j];
        dinp[i * c + j] += (dnorm - dnorm_mean[r] - norm * dnorm_norm_mean[r]) * rstd[i];
      }
    }
  });
  // dw, db: each column sums its rows in row order (as one row loop would); columns are
  // independent, so chunks of them go to the team.
  constexpr size_t kCols = 64;
  for_each_index((c + kCols - 1) / kCols, team, [&](size_t ch) {
    const size_t j0 = ch * kCols, j1 = std::min(c, j0 + kCols);
    for (size_t i = 0; i < n; ++i) {
      const T* x = inp + i * c;
      const T* dy = dout + i * c;
      for (size_t j = j0; j < j1; ++j) {
        const T norm = (x[j] - mean[i]) * rstd[i];
        db[j] += dy[j];
        dw[j] += norm * dy[j];
      }
    }
  });
}

// Asks the CPU to start loading rows [0, rows) of `width` elements (row stride ld) into its caches,
// for reading or (kWrite) for writing: the next attention head's operands and results, while this
// head's products run. A head's rows are a few cache lines each, spread over a layer's megabytes of
// activations, past what the hardware prefetchers follow (the per-head products of the attention
// model took 2.55 ms a step without, 2.15-2.2 with: `drift bench train --shapes`). A hint only:
// nothing is read or written.
template <bool kWrite = false, typename T>
void prefetch_rows(const T* p, size_t rows, size_t width, size_t ld) {
  constexpr size_t kLine = 64 / sizeof(T);
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < width; j += kLine) __builtin_prefetch(p + r * ld + j, kWrite ? 1 : 0);
}

// Where attention head bh = b * H + h (the loops' order, h fastest) keeps its rows, in elements:
// its q in qkv (B,T,3C; k and v follow at +C and +2C), its T x T block of att (B,H,T,T), and its
// columns of a (B,T,C) tensor (the output, dout). One place for the offsets that a head's products
// read and the next head's prefetches name.
struct HeadAt {
  size_t qkv, att, btc;
};
inline HeadAt head_at(size_t bh, size_t t, size_t c, size_t nh) {
  const size_t b = bh / nh, h = bh % nh, hs = c / nh;
  return {b * t * 3 * c + h * hs, bh * t * t, b * t * c + h * hs};
}

// Causal multi-head self-attention core.
// qkv (B,T,3C) holds q | k | v per position; out (B,T,C); att (B,H,T,T) the softmax probabilities
// (zero above the diagonal). Per (b, h): S = Q·Kᵀ (site score), P = softmax(S / sqrt(hs)) causal,
// O = P·V (site value); hs = C / H. In two passes (all P, then all O) so that P can be quantized in
// between (model/elementwise.h); each site's calls keep their (b, h) order either way.
template <typename T>
void attention_probs_forward(MatmulSites& s, const LinearSites& score, T* att, const T* qkv, size_t bsz, size_t t,
                             size_t c, size_t nh) {
  const size_t hs = c / nh, c3 = 3 * c;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  for (size_t bh = 0; bh < bsz * nh; ++bh) {
    const HeadAt at = head_at(bh, t, c, nh);
    const T* q = qkv + at.qkv;
    const T* k = q + c;
    T* p = att + at.att;
    if (bh + 1 < bsz * nh) {
      const HeadAt next = head_at(bh + 1, t, c, nh);
      prefetch_rows(qkv + next.qkv, t, hs, c3);
      prefetch_rows(qkv + next.qkv + c, t, hs, c3);
      prefetch_rows<true>(att + next.att, 1, t * t, 0);
    }
    // S (T,T) = Q (T,hs) · Kᵀ (hs,T): K is stored (T,hs) with ld 3C, i.e. Kᵀ transposed.
    s.matmul<T>(score.fwd, t, hs, t, q, c3, false, k, c3, true, p, t, false, WriteC::store);
    // Row i: P[i][j] = exp(S[i][j]*scale - max) / sum for j <= i, 0 after (causal).
    for_each_row_group(t, [&](size_t i0, auto rows) {
      constexpr size_t kRows = decltype(rows)::value;
      T* row = p + i0 * t;
      size_t len[kRows];
      T mx[kRows], sum[kRows];
      for (size_t r = 0; r < kRows; ++r) {
        len[r] = i0 + r + 1;
        for (size_t j = 0; j < len[r]; ++j) row[r * t + j] *= scale;
      }
      exp_minus_max_rows<kRows>(row, t, row, t, len, mx, sum);
      for (size_t r = 0; r < kRows; ++r) {
        T* pr = row + r * t;
        const T inv = T(1) / sum[r];
        for (size_t j = 0; j < len[r]; ++j) pr[j] *= inv;
        for (size_t j = len[r]; j < t; ++j) pr[j] = 0;
      }
    });
  }
}

// out (B,T,C): O (T,hs) = P (T,T) · V (T,hs) per (b, h), P from att (B,H,T,T).
template <typename T>
void attention_values_forward(MatmulSites& s, const LinearSites& value, T* out, const T* att, const T* qkv,
                              size_t bsz, size_t t, size_t c, size_t nh) {
  const size_t hs = c / nh, c3 = 3 * c;
  for (size_t bh = 0; bh < bsz * nh; ++bh) {
    const HeadAt at = head_at(bh, t, c, nh);
    if (bh + 1 < bsz * nh) {
      const HeadAt next = head_at(bh + 1, t, c, nh);
      prefetch_rows(qkv + next.qkv + 2 * c, t, hs, c3);
      prefetch_rows(att + next.att, 1, t * t, 0);
      prefetch_rows<true>(out + next.btc, t, hs, c);
    }
    s.matmul<T>(value.fwd, t, t, hs, att + at.att, t, false, qkv + at.qkv + 2 * c, c3, false, out + at.btc, c, false,
                WriteC::store);
  }
}

// dqkv (B,T,3C) = gradient of the loss through the attention core; datt (T,T) scratch of one head.
// att: the softmax probabilities; att_mm: P as the value product used it (Q(P) when quantized;
// null: att). dV uses att_mm; the softmax backward uses att (straight-through past Q).
template <typename T>
void attention_backward(MatmulSites& s, const LinearSites& score, const LinearSites& value, T* dqkv, T* datt,
                        const T* dout, const T* qkv, const T* att, size_t bsz, size_t t, size_t c, size_t nh,
                        const T* att_mm = nullptr) {
  if (!att_mm) att_mm = att;
  const size_t hs = c / nh, c3 = 3 * c;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  for (size_t bh = 0; bh < bsz * nh; ++bh) {
    const HeadAt at = head_at(bh, t, c, nh);
    const T* q = qkv + at.qkv;
    const T* k = q + c;
    const T* v = q + 2 * c;
    T* dq = dqkv + at.qkv;
    T* dk = dq + c;
    T* dv = dq + 2 * c;
    const T* p = att + at.att;
    const T* pm = att_mm + at.att;
    const T* dO = dout + at.btc;
    if (bh + 1 < bsz * nh) {
      const HeadAt next = head_at(bh + 1, t, c, nh);
      for (size_t part = 0; part < 3; ++part) prefetch_rows(qkv + next.qkv + part * c, t, hs, c3);
      prefetch_rows(dout + next.btc, t, hs, c);
      prefetch_rows(att + next.att, 1, t * t, 0);
      if (att_mm != att) prefetch_rows(att_mm + next.att, 1, t * t, 0);
      for (size_t part = 0; part < 3; ++part) prefetch_rows<true>(dqkv + next.qkv + part * c, t, hs, c3);
    }
    // dP (T,T) = dO (T,hs) · Vᵀ (hs,T)          [value.grad_input]
    s.matmul<T>(value.gi, t, hs, t, dO, c, false, v, c3, true, datt, t, false, WriteC::store);
    // dV (T,hs) = Pᵀ (T,T) · dO (T,hs)           [value.grad_weight]
    s.matmul<T>(value.gw, t, t, hs, pm, t, true, dO, c, false, dv, c3, false, WriteC::store);
    // dS = P * (dP - rowsum(dP * P)) * scale (softmax backward, causal)
    for_each_row_group(t, [&](size_t i0, auto rows) {
      constexpr size_t kRows = decltype(rows)::value;
      size_t len[kRows];
      T dot[kRows];
      for (size_t r = 0; r < kRows; ++r) len[r] = i0 + r + 1;
      dot_rows<kRows>(p + i0 * t, t, datt + i0 * t, t, len, dot);
      for (size_t r = 0; r < kRows; ++r) {
        T* d = datt + (i0 + r) * t;
        const T* pr = p + (i0 + r) * t;
        for (size_t j = 0; j < len[r]; ++j) d[j] = pr[j] * (d[j] - dot[r]) * scale;
        for (size_t j = len[r]; j < t; ++j) d[j] = 0;
      }
    });
    // dQ (T,hs) = dS (T,T) · K (T,hs)            [score.grad_input]
    s.matmul<T>(score.gi, t, t, hs, datt, t, false, k, c3, false, dq, c3, false, WriteC::store);
    // dKᵀ (hs,T) = Qᵀ (hs,T) · dS (T,T)          [score.grad_weight], stored transposed into dK
    s.matmul<T>(score.gw, hs, t, t, q, c3, true, datt, t, false, dk, c3, true, WriteC::store);
  }
}

// Softmax cross-entropy. logits (N,V), targets (N) -> probs (N,V), losses (N); returns the mean loss
// (summed in double, in index order).
template <typename T>
double crossentropy_forward(T* probs, T* losses, const T* logits, const int32_t* targets, size_t n, size_t v) {
  double total = 0;
  for_each_row_group(n, [&](size_t i0, auto rows) {
    constexpr size_t kRows = decltype(rows)::value;
    size_t len[kRows];
    T mx[kRows], sum[kRows];
    std::fill(len, len + kRows, v);
    exp_minus_max_rows<kRows>(logits + i0 * v, v, probs + i0 * v, v, len, mx, sum);
    for (size_t r = 0; r < kRows; ++r) {
      const size_t i = i0 + r;
      const T* x = logits + i * v;
      T* p = probs + i * v;
      const T inv = T(1) / sum[r];
      for (size_t j = 0; j < v; ++j) p[j] *= inv;
      // -log p[target], computed from the logits so that it stays finite when p underflows
      losses[i] = std::log(sum[r]) - (x[targets[i]] - mx[r]);
      total += static_cast<double>(losses[i]);
    }
  });
  return total / static_cast<double>(n);
}

// dlogits (N,V) = (probs - onehot(targets)) * loss_scale / N: the gradient of the mean loss, times
// the loss scale (a power of two in practice, so the scaled gradient is the unscaled one times it
// exactly, until it overflows: the point of loss scaling is where the backward operands land).
template <typename T>
void crossentropy_backward(T* dlogits, const T* probs, const int32_t* targets, size_t n, size_t v, double loss_scale = 1.0) {
  const T inv_n = static_cast<T>(loss_scale) / static_cast<T>(n);
  // (p - 0) * inv_n is p * inv_n for every p (-0 - +0 is -0; a NaN stays a NaN, quieted by the
  // multiply either way), so a row is one plain scaling pass, which vectorises, and the target's
  // element is then redone with its 1.
  for (size_t i = 0; i < n; ++i) {
    const T* p = probs + i * v;
    T* d = dlogits + i * v;
    for (size_t j = 0; j < v; ++j) d[j] = p[j] * inv_n;
    const size_t t = static_cast<size_t>(targets[i]);
    if (t < v) d[t] = (p[t] - T(1)) * inv_n;
  }
}

// ---------------------------------------------------------------------------------------------
// Elementwise quantization around LayerNorm and the activation (model/elementwise.h): the forward
// uses Q(γ), Q(β) and hands on Q(output); the backward is straight-through (the gradient passes Q
// unchanged) and uses what the forward used.

// out (N,C) = Q_out(LN(inp; Q_w(w), Q_b(b))); wq, bq hold Q(w), Q(b) when those sites quantize.
template <typename T>
void layernorm_q_forward(ElementwiseSites& e, const LayerNormSites& s, T* out, T* mean, T* rstd, const T* inp,
                         const T* w, const T* b, size_t n, size_t c, std::vector<T>& wq, std::vector<T>& bq) {
  const T* wu = e.quantized(s.weight, w, 1, c, wq);
  const T* bu = e.quantized(s.bias, b, 1, c, bq);
  layernorm_forward(out, mean, rstd, inp, wu, bu, n, c);
  e.quantize(s.out, out, n, c);
}

// The γ the last layernorm_q_forward used (what the backward's dx must use).
template <typename T>
const T* layernorm_weight_used(const ElementwiseSites& e, const LayerNormSites& s, const T* w, const std::vector<T>& wq) {
  return e.active(s.weight) ? wq.data() : w;
}

// act = tanh or gelu over pre (rows, k): pre is quantized in place (act_in), out = act(pre), and the
// tensor the next layer reads is returned: out itself, or Q(out) in out_q (act_out). The backward
// needs out unquantized (tanh') or pre as quantized (gelu'): both are kept.
template <typename T>
const T* activation_q_forward(ElementwiseSites& e, const ActivationSites& s, bool gelu, T* out, T* pre, size_t rows,
                              size_t k, std::vector<T>& out_q) {
  e.quantize(s.in, pre, rows, k);
  if (gelu)
    gelu_forward(out, pre, rows * k);
  else
    tanh_forward(out, pre, rows * k);
  return e.quantized(s.out, static_cast<const T*>(out), rows, k, out_q);
}

// dpre (N) from dout (N): tanh' from out, gelu' from pre (the forward's own values).
template <typename T>
void activation_backward(bool gelu, T* dpre, const T* dout, const T* pre, const T* out, size_t n) {
  if (gelu)
    gelu_backward(dpre, dout, pre, n);
  else
    tanh_backward(dpre, dout, out, n);
}

// Mean squared error over pred, target (N,O): the mean of (pred - target)^2, each square in T,
// summed in double in index order.
template <typename T>
double mse_forward(const T* pred, const T* target, size_t n, size_t o) {
  double total = 0;
  for (size_t i = 0; i < n * o; ++i) {
    const T d = pred[i] - target[i];
    total += static_cast<double>(d * d);
  }
  return total / static_cast<double>(n * o);
}

// dpred (N,O) = 2 (pred - target) * loss_scale / (N*O)
template <typename T>
void mse_backward(T* dpred, const T* pred, const T* target, size_t n, size_t o, double loss_scale = 1.0) {
  const T g = T(2) * static_cast<T>(loss_scale) / static_cast<T>(n * o);
  for (size_t i = 0; i < n * o; ++i) dpred[i] = (pred[i] - target[i]) * g;
}

}  // namespace drift
