// GPU-only tests: the CUDA launches compute the bodies tests/test_backend_element.cpp proves on the
// host. Without a device this prints "skipped: no GPU" and exits 77, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_backend.h"

int main(int argc, char** argv) {
  std::string why;
  if (drift::cuda_device_count(&why) == 0) {
    std::printf("skipped: no GPU (%s)\n", why.c_str());
    return 77;
  }
  if (std::getenv("DRIFT_GPU_TESTS_EMULATED"))
    std::printf("CUDA emulator (tests/cuda_emu): drift's kernels run on the CPU; cuBLASLt's native FP8 and the "
                "largest quantizer shape are left to a device\n");
  doctest::Context context(argc, argv);
  return context.run();
}
