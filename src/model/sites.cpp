#include "model/sites.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "arith/float_rows.h"
#include "arith/random.h"
#include "arith/transpose.h"
#include "backend/backend.h"

namespace drift {

const char* to_string(Role r) {
  switch (r) {
    case Role::forward: return "forward";
    case Role::grad_input: return "grad_input";
    case Role::grad_weight: return "grad_weight";
  }
  return "?";
}

bool parse_role(const std::string& s, Role* out) {
  for (Role r : {Role::forward, Role::grad_input, Role::grad_weight})
    if (s == to_string(r)) {
      *out = r;
      return true;
    }
  return false;
}

size_t MatmulSites::add(const std::string& layer, Role role, TensorClass a, TensorClass b) {
  MatmulSite s;
  s.layer = layer;
  s.role = role;
  s.a_class = a;
  s.b_class = b;
  sites_.push_back(std::move(s));
  step_calls_.push_back(0);
  return sites_.size() - 1;
}

LinearSites MatmulSites::add_linear(const std::string& layer) {
  using TC = TensorClass;
  return {add(layer, Role::forward, TC::activation, TC::weight), add(layer, Role::grad_input, TC::gradient, TC::weight),
          add(layer, Role::grad_weight, TC::activation, TC::gradient)};
}

LinearSites MatmulSites::add_bilinear(const std::string& layer) {
  using TC = TensorClass;
  return {add(layer, Role::forward, TC::activation, TC::activation),
          add(layer, Role::grad_input, TC::gradient, TC::activation),
          add(layer, Role::grad_weight, TC::activation, TC::gradient)};
}

void MatmulSites::begin_step(uint64_t step) {
  step_ = step;
  for (auto& c : step_calls_) c = 0;
}

void MatmulSites::reset_telemetry() {
  for (auto& s : sites_) {
    s.tel = MatmulTelemetry();
    s.calls = 0;
  }
}

MatmulContext MatmulSites::context(size_t id) {
  MatmulSite& s = sites_.at(id);
  MatmulContext ctx;
  ctx.seed = seed;
  ctx.stream = splitmix64(splitmix64(splitmix64(step_) ^ id) ^ step_calls_[id]++);
  ctx.delayed_a = &s.delayed_a;
  ctx.delayed_b = &s.delayed_b;
  ctx.force_reference = force_reference;
  ctx.cast_error = ctx.check_bound = diagnose;
  ctx.count_swamping = count_swamping;
  ctx.telemetry = telemetry;
  ctx.workspace = &workspace_;
  return ctx;
}

void MatmulSites::clear_captured() {
  for (auto& s : sites_) s.captured.clear();
}

template <typename V>
void MatmulSites::capture(size_t id, const V* c, size_t ldc, size_t m, size_t n) {
  MatmulSite& s = sites_[id];
  if (!capture_forward || s.role != Role::forward) return;
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) s.captured.push_back(static_cast<double>(c[i * ldc + j]));
}

void MatmulSites::record(size_t id, const MatmulTelemetry& t) {
  MatmulSite& s = sites_[id];
  auto route = std::find_if(s.routes.begin(), s.routes.end(),
                            [&](const auto& r) { return std::strcmp(r.first, t.route) == 0; });
  if (route == s.routes.end())
    s.routes.emplace_back(t.route, 1);
  else
    ++route->second;
  if (s.calls++ == 0)
    s.tel = t;
  else
    s.tel.merge(t);
}

void MatmulTimes::add(const Shape& key, double seconds) {
  auto same = [&](const Shape& s) {
    return s.site == key.site && s.m == key.m && s.k == key.k && s.n == key.n && s.ta == key.ta && s.tb == key.tb;
  };
  auto it = std::find_if(shapes.begin(), shapes.end(), same);
  if (it == shapes.end()) it = shapes.insert(shapes.end(), key);
  ++it->calls;
  it->seconds += seconds;
}

template <typename T>
void MatmulSites::matmul(size_t site, size_t m, size_t k, size_t n, const T* a, size_t lda, bool ta, const T* b,
                         size_t ldb, bool tb, T* c, size_t ldc, bool tc, WriteC how) {
  if (!times) return matmul_untimed(site, m, k, n, a, lda, ta, b, ldb, tb, c, ldc, tc, how);
  const auto t0 = std::chrono::steady_clock::now();
  matmul_untimed(site, m, k, n, a, lda, ta, b, ldb, tb, c, ldc, tc, how);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MatmulTimes::Shape key;
  key.site = site, key.m = m, key.k = k, key.n = n, key.ta = ta, key.tb = tb;
  times->add(key, s);
}

namespace {

// Whether C (M x N) = A·B and its transpose computed as Bᵀ·Aᵀ, with the operands' quantizers and
// delayed states traded along with their data, give the same bits. The engine quantizes both
// operands in one canonical layout (rows x K), which the trade leaves as it was; products commute
// exactly; every sum runs over K in an order shared by all elements (per-block permutations
// included). What could tell the two apart is randomness drawn by position: stochastic rounding of
// an operand (from the operand's own sub-stream), of products, sums, block scales or C (indexed by
// i*N + j). A call with any of it keeps its orientation.
bool same_bits_transposed(const MatmulPolicy& p) {
  auto fixed = [](const RoundSpec& r) { return r.mode != Rounding::sr; };
  return fixed(p.a.round) && fixed(p.b.round) && (!p.product_format || fixed(p.product_round)) &&
         fixed(p.inner.round) && fixed(p.outer.round) && fixed(p.out_round);
}

// Whether computing C = A·B as Cᵀ = Bᵀ·Aᵀ moves fewer elements around the engine. Each operand
// stored the other way round from the kernel's wish (A K-major, B N x K) is transposed once in
// packing, and a transposed write of C costs about what a transpose does; a row-major write is
// free (straight from the kernel) or, adding, about a quarter of that (a write onto zero counts as a
// plain one: its +0 pass, where it runs, costs the same either way). So dW = Xᵀ·dY, whose result is
// stored transposed, pays for a layer wider in than out (mlp's hidden layer: 64 x 512
// transposed instead of 512 x 512 plus a transposed add), and so does a forward product of a small
// batch with a wide weight (mlp: Yᵀ = W·Xᵀ transposes 64 x 512 twice instead of 512 x 512 once).
// Of attention's products at its 1024 tokens the dW of fc2 and of the attention projection trade;
// small calls (per-head products) keep their orientation.
bool traded_product_pays(size_t m, size_t k, size_t n, bool ta, bool tb, bool tc, WriteC how) {
  constexpr size_t kMinElements = size_t{1} << 14;
  if (m * n < kMinElements) return false;
  auto write = [&](bool transposed) { return transposed ? m * n : how == WriteC::add ? m * n / 4 : 0; };
  const size_t named = (ta ? m * k : 0) + (tb ? n * k : 0) + write(tc);
  const size_t traded = (tb ? 0 : n * k) + (ta ? 0 : m * k) + write(!tc);
  return traded < named;
}

}  // namespace

template <typename T>
void MatmulSites::matmul_untimed(size_t site, size_t m, size_t k, size_t n, const T* a, size_t lda, bool ta,
                                 const T* b, size_t ldb, bool tb, T* c, size_t ldc, bool tc, WriteC how) {
  MatmulContext ctx = context(site);
  const MatmulPolicy& policy = sites_[site].policy;
  // The product computed as Cᵀ = Bᵀ·Aᵀ where that moves fewer elements and gives the same bits
  // (diagnostic calls, whose per-operand measurements and captured products are made as the caller
  // named them, keep their orientation). The telemetry's operands are traded back.
  const bool diagnostic = ctx.cast_error || ctx.check_bound || (capture_forward && sites_[site].role == Role::forward);
  if (!keep_orientation && !diagnostic && traded_product_pays(m, k, n, ta, tb, tc, how) &&
      same_bits_transposed(policy)) {
    MatmulPolicy traded = policy;
    std::swap(traded.a, traded.b);
    std::swap(ctx.delayed_a, ctx.delayed_b);
    MatmulTelemetry t = write_product(site, n, k, m, b, ldb, !tb, a, lda, !ta, c, ldc, !tc, how, traded, ctx);
    std::swap(t.a, t.b);
    record(site, t);
    ++sites_[site].traded_calls;
    return;
  }
  record(site, write_product(site, m, k, n, a, lda, ta, b, ldb, tb, c, ldc, tc, how, policy, ctx));
}

namespace {

// c (m x n; n x m when tc) = w (m x n, dense), or c + w when `add` (one add in T each). Each element of
// c is written once, so the loop order changes no bit: rows stream when c is row-major, and a
// transposed c is written in square tiles that keep both sides in cache.
template <typename T>
void write_back(const T* w, size_t m, size_t n, T* c, size_t ldc, bool tc, bool add) {
  if (!tc) {
    for (size_t i = 0; i < m; ++i) {
      T* dst = c + i * ldc;
      const T* src = w + i * n;
      if (add)
        for (size_t j = 0; j < n; ++j) dst[j] = dst[j] + src[j];
      else
        std::copy(src, src + n, dst);
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    transpose_floats(w, m, n, n, c, ldc, add);  // the same adds, in 4 x 4 vector blocks
  } else {
    constexpr size_t kTile = 16;
    for (size_t j0 = 0; j0 < n; j0 += kTile)
      for (size_t i0 = 0; i0 < m; i0 += kTile) {
        const size_t j1 = std::min(n, j0 + kTile), i1 = std::min(m, i0 + kTile);
        for (size_t j = j0; j < j1; ++j) {
          T* dst = c + j * ldc;
          if (add)
            for (size_t i = i0; i < i1; ++i) dst[i] = dst[i] + w[i * n + j];
          else
            for (size_t i = i0; i < i1; ++i) dst[i] = w[i * n + j];
        }
      }
  }
}

// c = +0 + c over rows x cols (row r at c + r*ldc): what adding each element into a +0 gives (-0
// becomes +0, a signalling NaN quiet, every other value stays), where the element already lies.
template <typename T>
void add_zero(T* c, size_t rows, size_t cols, size_t ldc) {
  for (size_t r = 0; r < rows; ++r) {
    T* row = c + r * ldc;
    if constexpr (std::is_same_v<T, float>)
      add_zero_floats(row, cols);
    else
      for (size_t j = 0; j < cols; ++j) row[j] = T(0) + row[j];
  }
}

}  // namespace

template <typename T>
MatmulTelemetry MatmulSites::write_product(size_t site, size_t m, size_t k, size_t n, const T* a, size_t lda, bool ta,
                                           const T* b, size_t ldb, bool tb, T* c, size_t ldc, bool tc, WriteC how,
                                           const MatmulPolicy& policy, const MatmulContext& ctx) {
  Backend& engine = backend ? *backend : cpu_backend();
  // The product goes straight into c when it is a row-major write; else into a scratch C (m x n)
  // that is then added or written transposed. Either way each element of c is written once, and a
  // write onto zero then takes its +0 in place, unless the engine proves no element is -0 (then
  // +0 + x is x: the pass would be a megabyte of reads at the mlp's size for nothing).
  const bool add = how == WriteC::add;
  const bool direct = !tc && !add;
  std::vector<T>& scratch = scratch_c<T>();
  T* out = c;
  size_t ldo = ldc;
  if (!direct) {
    // Grown, never shrunk: the sites' products differ in size, and a vector resized down and up
    // again zeroes the regrown part at every call.
    if (scratch.size() < m * n) scratch.resize(m * n);
    out = scratch.data();
    ldo = n;
  }
  const MatViewOf<T> va{a, m, k, lda, ta}, vb{b, k, n, ldb, tb};
  const MatmulTelemetry tel = engine.matmul(va, vb, out, ldo, policy, ctx);
  capture(site, out, ldo, m, n);
  if (!direct) write_back(scratch.data(), m, n, c, ldc, tc, add);
  if (how == WriteC::add_to_zero && !tel.no_negative_zero) add_zero(c, tc ? n : m, tc ? m : n, ldc);
  return tel;
}

template void MatmulSites::matmul<float>(size_t, size_t, size_t, size_t, const float*, size_t, bool, const float*,
                                         size_t, bool, float*, size_t, bool, WriteC);
template void MatmulSites::matmul<double>(size_t, size_t, size_t, size_t, const double*, size_t, bool, const double*,
                                          size_t, bool, double*, size_t, bool, WriteC);

}  // namespace drift
