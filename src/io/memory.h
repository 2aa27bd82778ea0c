// Allocation sizes checked before allocating: a buffer whose size comes from user input (a model's
// dimensions, a matmul's shapes) is compared with the machine's memory first, so that a size that
// cannot fit is an error saying what was asked and why, not std::bad_alloc (or the OOM killer).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace drift::io {

// Thrown by check_allocation; the command line reports it as bad input (exit 2).
struct TooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The machine's physical memory in bytes (0 when unknown).
uint64_t physical_memory_bytes();

// Checks that `count` elements of `elem_bytes` each (count * elem_bytes, overflow-safe) fit in
// `memory_bytes` (by default the physical memory). `what` says what the buffer is and which input
// sized it ("model parameters and gradients (model.hidden, model.embed, ...)"). Throws TooLarge.
void check_allocation(uint64_t count, uint64_t elem_bytes, const std::string& what, uint64_t memory_bytes = 0);

}  // namespace drift::io
