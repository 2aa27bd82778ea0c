// The CPU engine's double entry behind the float interface through DoubleStaging: float operands
// copied into doubles, C narrowed back. It is the route the CUDA backend takes and the one every
// training matmul took before the float entry reached the backend interface, so tests hold the
// float route to it bit for bit.
#pragma once

#include "backend/backend.h"
#include "backend/cpu_backend.h"

namespace drift::test {

class StagedCpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu-staged"; }
  std::string unsupported_reason(const MatmulPolicy& policy) const override { return cpu_.unsupported_reason(policy); }
  MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    return cpu_.matmul(a, b, c, ldc, policy, ctx);
  }
  MatmulTelemetry matmul(const MatViewF& a, const MatViewF& b, float* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    return staging_.matmul(cpu_, a, b, c, ldc, policy, ctx);
  }

 private:
  CpuBackend cpu_;
  DoubleStaging staging_;
};

}  // namespace drift::test
