// libFuzzer target: the .npy reader. Every input must give an array whose size matches its shape,
// or an io::IoError naming the file; any other exception, a crash or a sanitizer finding is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const drift::io::Array a = drift::io::parse_npy(bytes, "fuzz.npy");
    size_t n = 1;
    for (size_t d : a.shape) n *= d;
    if (n != a.data.size()) std::abort();
  } catch (const drift::io::IoError& e) {
    if (std::string(e.what()).rfind("fuzz.npy", 0) != 0) std::abort();  // the message names the file
  }
  return 0;
}
