#include "train/allreduce.h"

namespace drift {

namespace {

float add_rounded(float a, float b, const Format& f, const RoundSpec& spec) {
  double s, e;
  two_sum(a, b, &s, &e);
  return static_cast<float>(round_to_sum(s, e, f, spec));
}

}  // namespace

void simulated_allreduce(const std::vector<std::vector<float>>& parts, float* out, size_t n, const Format& f,
                         const RoundSpec& spec, const std::string& order) {
  const size_t R = parts.size();
  auto wire = [&](size_t r, size_t i) { return static_cast<float>(round_to(parts[r][i], f, spec)); };
  if (order == "tree") {
    std::vector<float> acc(R);
    for (size_t i = 0; i < n; ++i) {
      for (size_t r = 0; r < R; ++r) acc[r] = wire(r, i);
      for (size_t d = 1; d < R; d *= 2)
        for (size_t r = 0; r + d < R; r += 2 * d) acc[r] = add_rounded(acc[r], acc[r + d], f, spec);
      out[i] = acc[0];
    }
    return;
  }
  // ring: chunk c = [c*n/R, (c+1)*n/R)
  for (size_t c = 0; c < R; ++c) {
    const size_t lo = c * n / R, hi = (c + 1) * n / R;
    for (size_t i = lo; i < hi; ++i) {
      float s = wire((c + 1) % R, i);
      for (size_t k = 2; k <= R; ++k) s = add_rounded(s, wire((c + k) % R, i), f, spec);
      out[i] = s;
    }
  }
}

}  // namespace drift
