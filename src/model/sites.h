// Matmul sites: every matrix multiply a model does is one call at a named site (layer, role), and
// goes through the engine (arith/matmul.h) under that site's resolved policy. The registry keeps
// each site's policy, its delayed-scaling state and the telemetry of its calls.
//
// Roles, for a layer Y = X·W (X: N x C activations, W: C x OC the weight as used):
//   forward      Y  = X · W        a = activation, b = weight
//   grad_input   dX = dY · Wᵀ      a = gradient,   b = weight
//   grad_weight  dW = Xᵀ · dY      a = activation, b = gradient
// The attention products follow the same pattern with K (scores) and V (values) in W's place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "model/params.h"

namespace drift {

class Backend;  // backend/backend.h

enum class Role : uint8_t { forward, grad_input, grad_weight };
const char* to_string(Role r);
bool parse_role(const std::string& s, Role* out);

struct MatmulSite {
  std::string layer;           // e.g. "hidden0", "block0.attn.score"
  Role role = Role::forward;
  TensorClass a_class = TensorClass::activation, b_class = TensorClass::weight;
  MatmulPolicy policy;         // fp32 passthrough until resolved
  MatmulTelemetry tel;         // merged over the calls since reset_telemetry()
  uint64_t calls = 0;          // calls since reset_telemetry()
  DelayedState delayed_a, delayed_b;
  // Calls per route (MatmulTelemetry::route) since the sites were made: which kernel computed this
  // site's products, for the run's summary and the benchmark (never reset by reset_telemetry()).
  std::vector<std::pair<const char*, uint64_t>> routes;
  // Calls computed as Cᵀ = Bᵀ·Aᵀ (MatmulSites::matmul): the same bits, fewer elements moved.
  uint64_t traded_calls = 0;
  // With MatmulSites::capture_forward (diagnostics): the products of this forward site's calls,
  // C row by row, one call after another, since the last clear_captured().
  std::vector<double> captured;
  std::string name() const { return layer + "." + to_string(role); }
};

// Where a step's matmul time goes (drift bench train only): per site and call shape, the calls and
// the wall time of MatmulSites::matmul (the engine's call and the layout work around it), so the
// benchmark can set a step's matmul time against the engine's own time for the same shapes.
struct MatmulTimes {
  struct Shape {
    size_t site = 0, m = 0, k = 0, n = 0;
    bool ta = false, tb = false;
    uint64_t calls = 0;
    double seconds = 0;
  };
  std::vector<Shape> shapes;
  void add(const Shape& key, double seconds);
  void reset() { shapes.clear(); }
};

// How a product goes into C.
enum class WriteC {
  store,        // c = the product
  add,          // c = c + the product (one add in T)
  add_to_zero,  // c = +0 + the product: the bits `add` gives where c holds +0 (a gradient not yet
                // written this step), without c being cleared or read first
};

// A product's destination and how it goes in.
template <typename T>
struct WriteTo {
  T* c = nullptr;
  WriteC how = WriteC::store;
};

// The three sites of one linear-like layer.
struct LinearSites {
  size_t fwd = 0, gi = 0, gw = 0;
};

class MatmulSites {
 public:
  size_t add(const std::string& layer, Role role, TensorClass a, TensorClass b);
  // forward (activation, weight), grad_input (gradient, weight), grad_weight (activation, gradient).
  LinearSites add_linear(const std::string& layer);
  // The same for a product of two activations (attention): W's place is held by an activation.
  LinearSites add_bilinear(const std::string& layer);

  std::vector<MatmulSite>& sites() { return sites_; }
  const std::vector<MatmulSite>& sites() const { return sites_; }
  size_t size() const { return sites_.size(); }

  // Random keys: every call gets a distinct stream from (step, site, call index in the step).
  uint64_t seed = 0;
  void begin_step(uint64_t step);
  void reset_telemetry();
  bool force_reference = false;
  // Diagnostic passes only (diag/): every call also measures cast error and checks the error bound.
  bool diagnose = false;
  // Diagnostic passes only: keep every forward-role product in its site's `captured` (per-site
  // forward deviation, diag/diagnostics.h). Off in training.
  bool capture_forward = false;
  void clear_captured();
  // Count rounded adds and swamped adds (an addend lost entirely) in every call (MatmulTelemetry);
  // off, the fast kernels skip the counting.
  bool count_swamping = false;
  // Off: the calls' operand statistics may be left out (MatmulContext::telemetry), for a training
  // step whose telemetry no metrics line reports; the products are the same.
  bool telemetry = true;
  // Where the matmuls run (not owned); nullptr: the CPU engine (backend/cpu_backend.h). Every
  // backend gives the same bits (backend/backend.h), so this changes speed, never results.
  Backend* backend = nullptr;
  // Off (nullptr) in training: the benchmark's record of where matmul time goes (not owned).
  MatmulTimes* times = nullptr;
  // Tests only: compute every product as the caller named it, never as Cᵀ = Bᵀ·Aᵀ.
  bool keep_orientation = false;

  // C (M x N) = A (M x K) * B (K x N) at `site`. Operands are stored row-major with leading
  // dimension ld; `ta`/`tb` say the stored matrix is the transpose (A stored K x M, B stored N x K).
  // The result goes to c[i*ldc + j] (or c[j*ldc + i] when `tc`) as `how` says (WriteC; the add is
  // an fp32 elementwise add for T = float). The product may be computed as Cᵀ = Bᵀ·Aᵀ, with the same
  // bits and telemetry, where that moves fewer elements.
  template <typename T>
  void matmul(size_t site, size_t m, size_t k, size_t n, const T* a, size_t lda, bool ta, const T* b, size_t ldb,
              bool tb, T* c, size_t ldc, bool tc, WriteC how);

 private:
  template <typename T>
  void matmul_untimed(size_t site, size_t m, size_t k, size_t n, const T* a, size_t lda, bool ta, const T* b,
                      size_t ldb, bool tb, T* c, size_t ldc, bool tc, WriteC how);
  // The engine's call under (policy, ctx) and the write-back of its C into c.
  template <typename T>
  MatmulTelemetry write_product(size_t site, size_t m, size_t k, size_t n, const T* a, size_t lda, bool ta,
                                const T* b, size_t ldb, bool tb, T* c, size_t ldc, bool tc, WriteC how,
                                const MatmulPolicy& policy, const MatmulContext& ctx);
  std::vector<MatmulSite> sites_;
  std::vector<uint64_t> step_calls_;
  uint64_t step_ = 0;
  // The engine's scratch memory for this model's matmuls (one call at a time).
  MatmulWorkspace workspace_;
  // C before a transposed or adding write-back, per element type.
  std::vector<float> scratch_f_;
  std::vector<double> scratch_d_;
  template <typename T>
  std::vector<T>& scratch_c() {
    if constexpr (std::is_same_v<T, float>)
      return scratch_f_;
    else
      return scratch_d_;
  }
  MatmulContext context(size_t site);  // the call's random keys and state; counts the call in the step
  void record(size_t site, const MatmulTelemetry& t);
  template <typename V>
  void capture(size_t site, const V* c, size_t ldc, size_t m, size_t n);
};

}  // namespace drift
