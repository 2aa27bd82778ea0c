// The backend factory (compiled once per CUDA backend it is linked with: CMakeLists.txt).
#include "backend/backend.h"

#include "backend/cpu_backend.h"

#ifdef DRIFT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace drift {

const char* backend_names() { return "cpu, cuda, cuda-native, cuda-native-fastacc"; }

bool cuda_backend_compiled() {
#ifdef DRIFT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "cuda" || name == "cuda-native" || name == "cuda-native-fastacc") {
#ifdef DRIFT_HAVE_CUDA
    return make_cuda_backend(name != "cuda", name == "cuda-native-fastacc");
#else
    throw BackendError("backend '" + name +
                       "': this drift was built without CUDA (configure with -DDRIFT_CUDA=ON on a machine with "
                       "the CUDA toolkit; see README, \"Building with and without CUDA\")");
#endif
  }
  throw BackendError("unknown backend '" + name + "' (expected one of: " + backend_names() + ")");
}

}  // namespace drift
