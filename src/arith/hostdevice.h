// Marks functions that must compile unchanged for the CPU and for CUDA device code.
// Everything in arith/ that touches a single number is written with these: no std:: calls that
// device code lacks, no globals, no exceptions.
#pragma once

#if defined(__CUDACC__)
#define DRIFT_HD __host__ __device__ __forceinline__
#else
#define DRIFT_HD inline
#endif

#include <cmath>
#include <cstdint>

namespace drift {

// Bit casts between doubles/floats and their encodings (memcpy is the portable spelling; both
// g++ and nvcc turn it into a register move).
DRIFT_HD uint64_t bits_of(double x) {
  uint64_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
}
DRIFT_HD double double_of(uint64_t u) {
  double x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
}
DRIFT_HD uint32_t bits_of(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
}
DRIFT_HD float float_of(uint32_t u) {
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
}

// Index of the highest set bit; -1 for x == 0 (nothing above bit 0: callers then get an exponent
// below every double's, e.g. floor_log2(0) = -1075 and 2^that = 0). The device's __clzll(0) is 64,
// which gives -1 already; the host's __builtin_clzll(0) is undefined, so 0 is decided first. Every
// x != 0 gives the same bits as before.
DRIFT_HD int top_bit(uint64_t x) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(x));
#else
  return x ? 63 - __builtin_clzll(x) : -1;
#endif
}

// IEEE operations by name (round to nearest even; no contraction, no flush): on the device the
// intrinsics nvcc never fuses or flushes; on the host std::fma and plain operators (built
// -ffp-contract=off).
// a*b + c with one rounding in double (the TwoProd error term of ops.h).
DRIFT_HD double fused_multiply_add(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
DRIFT_HD float f32_fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
DRIFT_HD float f32_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DRIFT_HD float f32_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
DRIFT_HD float f32_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// trunc(p * scale), the product cut to an integer toward zero, for a power-of-two scale and
// |p * scale| < 2^51 (2^22 for floats). On the device without a rounding instruction (a
// conversion-rate one): an fma rounding toward zero adds |p| * scale exactly to 2^52 (2^23), where
// the grid spacing is 1, so the sum's integer part is floor(|p| * scale); the sign is p's. On the
// host trunc of the double product (exact whenever it is 1 or more; below 1 the result is a zero
// of p's sign either way).
DRIFT_HD double cut_to_integer(double p, double scale) {
#if defined(__CUDA_ARCH__)
  return copysign(__dsub_rn(__fma_rz(fabs(p), scale, 0x1p52), 0x1p52), p);
#else
  return std::trunc(p * scale);
#endif
}
DRIFT_HD float cut_to_integer(float p, float scale) {
#if defined(__CUDA_ARCH__)
  return copysignf(__fsub_rn(__fmaf_rz(fabsf(p), scale, 0x1p23f), 0x1p23f), p);
#else
  return static_cast<float>(std::trunc(static_cast<double>(p) * scale));
#endif
}

// 2^e as a double, for -1074 <= e <= 1023, built from bits (exact; no libm).
DRIFT_HD double pow2(int e) {
  if (e >= -1022) return double_of(static_cast<uint64_t>(e + 1023) << 52);
  return double_of(uint64_t{1} << (e + 1074));
}

DRIFT_HD bool is_nan(double x) { return (bits_of(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
DRIFT_HD bool is_inf(double x) { return (bits_of(x) & 0x7fffffffffffffffull) == 0x7ff0000000000000ull; }
DRIFT_HD bool sign_bit(double x) { return (bits_of(x) >> 63) != 0; }
DRIFT_HD double abs_of(double x) { return double_of(bits_of(x) & 0x7fffffffffffffffull); }
DRIFT_HD double quiet_nan() { return double_of(0x7ff8000000000000ull); }
DRIFT_HD double infinity(bool neg) { return double_of(neg ? 0xfff0000000000000ull : 0x7ff0000000000000ull); }
DRIFT_HD double signed_zero(bool neg) { return double_of(neg ? 0x8000000000000000ull : 0); }

// Splits a finite non-zero double into (exponent of leading bit, 53-bit significand, its top bit).
DRIFT_HD void unpack_double(double x, int* e, uint64_t* sig, int* top) {
  const uint64_t u = bits_of(x) & 0x7fffffffffffffffull;
  const int field = static_cast<int>(u >> 52);
  if (field != 0) {
    *sig = (u & 0xfffffffffffffull) | (uint64_t{1} << 52);
    *top = 52;
    *e = field - 1023;
  } else {
    *sig = u;
    *top = top_bit(u);
    *e = *top - 1074;
  }
}

}  // namespace drift
