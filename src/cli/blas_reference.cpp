#include "cli/blas_reference.h"

#include <hwy/targets.h>
#ifdef DRIFT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include <array>
#include <string>

#include "backend/timing.h"

namespace drift::cli {

std::string narrow_kernels_note(const std::string& core) {
  // OpenBLAS's AVX-512 kernel families, as openblas_get_corename names them.
  constexpr std::array<const char*, 3> kAvx512Cores = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  for (const char* c : kAvx512Cores)
    if (core == c) return "";
  if (!(hwy::SupportedTargets() & HWY_AVX3)) return "";
  return " (narrower than this CPU's AVX-512, which drift uses: OPENBLAS_CORETYPE=SkylakeX, for drift and "
         "reference_pytorch.py alike, gives the reference AVX-512 too)";
}

#ifdef DRIFT_HAVE_OPENBLAS
std::string openblas_core() {
  const char* core = openblas_get_corename();
  return core ? core : "unknown";
}

std::string openblas_reference_line() {
  const char* config = openblas_get_config();
  const std::string core = openblas_core();
  const int threads = openblas_get_num_threads();
  return "reference: " + std::string(config ? config : "OpenBLAS") + ", " + core + " kernels, " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads") + narrow_kernels_note(core);
}

int use_blas_threads(int threads) {
  openblas_set_num_threads(threads);
  return openblas_get_num_threads();
}

double sgemm_seconds_per_call(const float* a, const float* b, float* c, size_t m, size_t n, size_t k,
                              double min_seconds) {
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  return seconds_per_call(
      [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mi, ni, ki, 1.0f, a, ki, b, ni, 0.0f, c, ni); },
      min_seconds);
}
#else
std::string openblas_core() { return "none"; }
std::string openblas_reference_line() { return "reference: none (this drift was built without OpenBLAS)"; }
int use_blas_threads(int) { return 0; }
double sgemm_seconds_per_call(const float*, const float*, float*, size_t, size_t, size_t, double) { return 0; }
#endif

}  // namespace drift::cli
