// Which OpenBLAS kernels a benchmark's reference runs. OpenBLAS picks its kernels by CPU model, and
// a release older than the CPU falls back to narrower ones: Debian bookworm's 0.3.21 runs its AVX2
// (Haswell) kernels on AMD Zen 5, which has AVX-512, so sgemm, and PyTorch's twin on the same
// library, run at a fraction of their speed there and every "drift vs reference" ratio grows. The
// benchmarks print the reference's kernels so that a ratio is never read without them.
#pragma once

#include <cstddef>
#include <string>

namespace drift::cli {

// The kernel family this drift's OpenBLAS chose (openblas_get_corename), or "none".
std::string openblas_core();

// "" when OpenBLAS's `core` kernels use AVX-512 or this CPU has none; otherwise a warning that the
// reference runs narrower kernels than drift, and how to select wider ones (OPENBLAS_CORETYPE,
// set for drift and for reference_pytorch.py alike).
std::string narrow_kernels_note(const std::string& core);

// "reference: <OpenBLAS build>, <core> kernels, <n> threads" and the note, for `drift bench gemm`.
std::string openblas_reference_line();

// Runs OpenBLAS's sgemm on `threads` threads from here on, and returns the count it then reports
// (openblas_get_num_threads), or 0 where drift was built without OpenBLAS. The benchmarks call it
// with the thread count drift's own side runs on: Debian's OpenBLAS keeps a thread pool of its own,
// sized from the environment when it loads (OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else every
// core), which `--threads` and omp_set_num_threads never reach, so a one-thread drift could be set
// against a two-thread sgemm.
int use_blas_threads(int threads);

// Seconds per call of OpenBLAS cblas_sgemm, C = A * B on row-major floats (A m x k, B k x n, C
// m x n), timed as backend/timing.h's seconds_per_call times one (the benchmarks' reference); 0
// where drift was built without OpenBLAS.
double sgemm_seconds_per_call(const float* a, const float* b, float* c, size_t m, size_t n, size_t k,
                              double min_seconds);

}  // namespace drift::cli
