// The CPU backend: the engine itself, behind the backend interface.
#pragma once

#include "backend/backend.h"

namespace drift {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  // Every policy the engine accepts.
  std::string unsupported_reason(const MatmulPolicy& policy) const override { return validate_policy(policy); }
  MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    return drift::matmul(a, b, c, ldc, policy, ctx);
  }
  // The engine's float entry: operands quantized from the floats in place (or read in place when
  // their quantizer is the identity), no double copy on the fast path.
  MatmulTelemetry matmul(const MatViewF& a, const MatViewF& b, float* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    return drift::matmul(a, b, c, ldc, policy, ctx);
  }
};

}  // namespace drift
