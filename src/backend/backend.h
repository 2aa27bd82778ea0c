// Where the matmul engine runs. A backend computes exactly what the CPU engine (arith/matmul.h)
// computes, bit for bit, or says up front that it cannot: unsupported_reason() is checked before a
// call, so a policy a backend cannot do exactly is refused with that reason, never run differently.
//
//   cpu          the engine itself (OpenMP + Highway fast path, literal reference otherwise)
//   cuda         the same definition on an NVIDIA GPU (backend/cuda/): operands are quantized on the
//                device (every scaling kind; backend/quantize_steps.h) and the products and sums
//                run there too
//   cuda-native  the GPU's real FP8 tensor cores through cuBLASLt: NOT the simulator. It exists to
//                compare the simulator's tensor-core models with the hardware (drift matmul only);
//                cuda-native-fastacc the same with Hopper's FP8 fast accumulation.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "arith/matmul.h"

namespace drift {

// A backend cannot be created (not compiled in, no device) or cannot run a call.
struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // "" when this backend runs `policy` with results identical to the CPU engine; else why not.
  virtual std::string unsupported_reason(const MatmulPolicy& policy) const = 0;
  bool supports(const MatmulPolicy& policy) const { return unsupported_reason(policy).empty(); }
  // C (M x N, row stride ldc) = A * B, as drift::matmul. Throws BackendError for an unsupported
  // policy, std::invalid_argument for the engine's own input errors.
  virtual MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc,
                                 const MatmulPolicy& policy, const MatmulContext& ctx) = 0;
  // The telemetry's `route` names the kernel that ran ("reference" and "fast.*" on the CPU; the
  // CUDA backend's kernel names on a GPU): how C was computed, never what it is.
  // The same for float operands read where they lie (a model's tensors) and float C, as the
  // engine's float entry: every element of C is (float) of what the double entry writes, and the
  // telemetry is the same. This is the entry every training matmul takes.
  virtual MatmulTelemetry matmul(const MatViewF& a, const MatViewF& b, float* c, size_t ldc,
                                 const MatmulPolicy& policy, const MatmulContext& ctx) = 0;
};

// The float entry for a backend whose engine takes doubles (CUDA): the operands copied exactly into
// double staging, the double entry run, C narrowed to float. Its buffers are reused call to call.
class DoubleStaging {
 public:
  MatmulTelemetry matmul(Backend& double_entry, const MatViewF& a, const MatViewF& b, float* c, size_t ldc,
                         const MatmulPolicy& policy, const MatmulContext& ctx);

 private:
  std::vector<double> a_, b_, c_;
};

// The CPU engine behind the backend interface, for callers given no backend (tests, tools). Stateless.
Backend& cpu_backend();

// The backend names drift accepts, for messages.
const char* backend_names();

// Whether this binary was built with the CUDA backend (CMake DRIFT_CUDA).
bool cuda_backend_compiled();

// Creates a backend by name. Throws BackendError when the name is unknown, the backend was not
// compiled in, or (cuda) no usable device is present; the message says which.
std::unique_ptr<Backend> make_backend(const std::string& name);

}  // namespace drift
