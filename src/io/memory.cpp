#include "io/memory.h"

#include <unistd.h>

#include <cstdio>

namespace drift::io {

namespace {

std::string bytes_words(long double b) {
  char buf[64];
  const char* unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof buf, u ? "%.1Lf %s" : "%.0Lf %s", b, unit[u]);
  return buf;
}

}  // namespace

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

void check_allocation(uint64_t count, uint64_t elem_bytes, const std::string& what, uint64_t memory_bytes) {
  const uint64_t memory = memory_bytes ? memory_bytes : physical_memory_bytes();
  if (memory == 0) return;  // unknown: let the allocator decide
  const long double need = static_cast<long double>(count) * static_cast<long double>(elem_bytes);
  if (need <= static_cast<long double>(memory)) return;
  throw TooLarge(what + ": " + std::to_string(count) + " elements of " + std::to_string(elem_bytes) + " bytes (" +
                 bytes_words(need) + ") do not fit in this machine's memory (" + bytes_words(static_cast<long double>(memory)) +
                 ")");
}

}  // namespace drift::io
