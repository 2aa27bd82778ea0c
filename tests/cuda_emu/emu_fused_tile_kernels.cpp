// The unchanged CUDA source, compiled by g++ against the emulator's <cuda_runtime.h>.
#include "backend/cuda/fused_tile_kernels.cu"
