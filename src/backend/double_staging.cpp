#include "backend/backend.h"

namespace drift {

MatmulTelemetry DoubleStaging::matmul(Backend& double_entry, const MatViewF& a, const MatViewF& b, float* c,
                                      size_t ldc, const MatmulPolicy& policy, const MatmulContext& ctx) {
  const MatView da = widened_copy(a, a_), db = widened_copy(b, b_);
  const size_t m = a.rows, n = b.cols;
  c_.resize(m * n);
  const MatmulTelemetry tel = double_entry.matmul(da, db, c_.data(), n, policy, ctx);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) c[i * ldc + j] = static_cast<float>(c_[i * n + j]);
  return tel;
}

}  // namespace drift
