// Every kernel launch is spelled DRIFT_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...):
// nvcc sees kernel<<<...>>>(args...), and the CUDA emulator of the tests (tests/cuda_emu), whose
// <cuda_runtime.h> defines the macro first, runs the same source on the CPU.
#pragma once

#include <cuda_runtime.h>

#ifndef DRIFT_LAUNCH
#define DRIFT_LAUNCH(kernel, grid, block, shared_bytes, stream) kernel<<<grid, block, shared_bytes, stream>>>
#endif
