#include "backend/cpu_backend.h"

namespace drift {

Backend& cpu_backend() {
  static CpuBackend cpu;  // stateless: the engine keeps no state between calls that changes a result
  return cpu;
}

}  // namespace drift
