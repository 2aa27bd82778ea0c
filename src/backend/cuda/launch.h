// Every kernel launch is spelled DRIFT_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...):
// nvcc sees kernel<<<...>>>(args...), and the CUDA emulator of the tests (tests/cuda_emu), whose
// <cuda_runtime.h> defines the macro first, runs the same source on the CPU.
#pragma once

#include <cuda_runtime.h>

#ifndef DRIFT_LAUNCH
#define DRIFT_LAUNCH(kernel, grid, block, shared_bytes, stream) kernel<<<grid, block, shared_bytes, stream>>>
#endif

// A device function kept out of line. (The emulator cannot define __noinline__ itself: the C
// library's headers spell GCC's attribute that way.)
#if defined(DRIFT_CUDA_EMULATOR)
#define DRIFT_NOINLINE __attribute__((noinline))
#else
#define DRIFT_NOINLINE __noinline__
#endif
