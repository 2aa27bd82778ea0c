// Blackwell block-scaled MMA probe (scripts/gpu_check.sh step 6): one MXFP8 (E4M3, E8M0 block scales
// of 32 along K) GEMM through cuBLASLt, which runs tcgen05.mma kind::mxf8f6f4 on sm_100. Writes the
// operands as their exact values (a.npy M x K, b.npy K x N, float64) and the GPU's result (d.npy M x N,
// float64 of the fp32 output) to DIR, for drift matmul to replay under each hypothesis preset.
//
// Every block scale is 2^0 (E8M0 byte 127), so the scale tensors' tiled layout does not matter; the
// elements are normal E4M3 values (exponents -6..8) and every block holds one of exponent 8, so drift's
// MX floor rule re-derives the same scales and each hypothesis sees the operands the GPU saw.
// What the probe decides is how a block's fused partial sum joins the running fp32 accumulator: after
// its own rounding, with one round-to-nearest addition (b200_mxfp8_e4m3_blocksum, as B200's unscaled
// FP8 MMA is measured to do), or aligned with the scaled products and truncated in the group
// (b200_mxfp8_e4m3_folded, B200TC.m's published c handling).
//
// Build: nvcc -O2 -arch=sm_100a blackwell_probe.cu -lcublasLt -o probe     Run: probe DIR
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "probe: %s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

// A normal E4M3 value from random bits: sign, exponent -6..8, 3 fraction bits (at most 448).
uint8_t random_e4m3(uint64_t* state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  const uint32_t r = static_cast<uint32_t>(*state >> 33);
  const uint32_t field = 1 + r % 15;      // biased exponent 1..15 (bias 7)
  uint32_t frac = (r >> 4) & 7;
  if (field == 15 && frac == 7) frac = 6;  // S.1111.111 is NaN
  return static_cast<uint8_t>(((r >> 8) & 1) << 7 | field << 3 | frac);
}

double e4m3_value(uint8_t b) {
  const int field = (b >> 3) & 15, frac = b & 7;
  const double v = field == 0 ? std::ldexp(frac, -9) : std::ldexp(8 + frac, field - 10);
  return (b & 0x80) ? -v : v;
}

void write_npy(const std::string& path, size_t rows, size_t cols, const std::vector<double>& v) {
  std::string hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                    std::to_string(cols) + "), }";
  hdr += std::string(63 - (10 + hdr.size()) % 64, ' ') + "\n";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "probe: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  const uint16_t len = static_cast<uint16_t>(hdr.size());
  std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  std::fwrite(&len, 2, 1, f);
  std::fwrite(hdr.data(), 1, hdr.size(), f);
  std::fwrite(v.data(), sizeof(double), v.size(), f);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const size_t m = 128, n = 128, k = 512;
  // A as M x K with K contiguous (cuBLASLt: K x M column-major, used transposed); B as N x K with K
  // contiguous (K x N column-major); D column-major M x N.
  std::vector<uint8_t> a8(m * k), b8(n * k);
  uint64_t state = 20;
  for (auto& x : a8) x = random_e4m3(&state);
  for (auto& x : b8) x = random_e4m3(&state);
  // The first element of every block gets exponent 8 (256..448): each block's amax then has exponent 8,
  // so drift's MX floor rule picks the scale 2^0 the GPU used and leaves every element as it is (a
  // block whose amax lay in [240, 256) would get 2^-1 and saturate its largest element).
  for (size_t i = 0; i < a8.size(); i += 32) a8[i] = static_cast<uint8_t>((a8[i] & 0x87) | 15 << 3);
  for (size_t i = 0; i < b8.size(); i += 32) b8[i] = static_cast<uint8_t>((b8[i] & 0x87) | 15 << 3);
  for (auto* v : {&a8, &b8})
    for (auto& x : *v)
      if ((x & 0x7f) == 0x7f) x = static_cast<uint8_t>(x - 1);  // S.1111.111 is NaN: 448 instead
  // Scale tensors: one E8M0 byte per 32 elements of K, padded to 128-row x 4-column tiles; all 2^0.
  const size_t kb = k / 32, pad_kb = (kb + 3) / 4 * 4;
  const size_t scale_a_bytes = (m + 127) / 128 * 128 * pad_kb, scale_b_bytes = (n + 127) / 128 * 128 * pad_kb;
  std::vector<uint8_t> sa(scale_a_bytes, 127), sb(scale_b_bytes, 127);

  uint8_t *da, *db, *dsa, *dsb;
  float* dd;
  void* ws;
  const size_t ws_bytes = 32u << 20;
  check(cudaMalloc(&da, a8.size()), "malloc A");
  check(cudaMalloc(&db, b8.size()), "malloc B");
  check(cudaMalloc(&dsa, sa.size()), "malloc A scales");
  check(cudaMalloc(&dsb, sb.size()), "malloc B scales");
  check(cudaMalloc(&dd, m * n * sizeof(float)), "malloc D");
  check(cudaMalloc(&ws, ws_bytes), "malloc workspace");
  check(cudaMemcpy(da, a8.data(), a8.size(), cudaMemcpyHostToDevice), "copy A");
  check(cudaMemcpy(db, b8.data(), b8.size(), cudaMemcpyHostToDevice), "copy B");
  check(cudaMemcpy(dsa, sa.data(), sa.size(), cudaMemcpyHostToDevice), "copy A scales");
  check(cudaMemcpy(dsb, sb.data(), sb.size(), cudaMemcpyHostToDevice), "copy B scales");

  cublasLtHandle_t lt;
  check(cublasLtCreate(&lt), "cublasLtCreate");
  cublasLtMatmulDesc_t desc;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn), "TRANSB");
  const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode), "A scale mode");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode), "B scale mode");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dsa, sizeof dsa), "A scales");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dsb, sizeof dsb), "B scales");
  cublasLtMatrixLayout_t la, lb, ld;
  check(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k), "layout A");
  check(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k), "layout B");
  check(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m), "layout D");
  cublasLtMatmulPreference_t pref;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes),
        "workspace");
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found), "heuristic");
  if (found == 0) {
    std::fprintf(stderr, "probe: cuBLASLt has no block-scaled MXFP8 algorithm on this GPU\n");
    return 3;
  }
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasLtMatmul(lt, desc, &alpha, da, la, db, lb, &beta, dd, ld, dd, ld, &heur.algo, ws, ws_bytes, nullptr),
        "cublasLtMatmul");
  check(cudaDeviceSynchronize(), "synchronize");
  std::vector<float> d(m * n);
  check(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy D");

  std::vector<double> a(m * k), b(k * n), out(m * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t kk = 0; kk < k; ++kk) a[i * k + kk] = e4m3_value(a8[i * k + kk]);
  for (size_t j = 0; j < n; ++j)
    for (size_t kk = 0; kk < k; ++kk) b[kk * n + j] = e4m3_value(b8[j * k + kk]);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) out[i * n + j] = d[i + j * m];
  write_npy(dir + "/a.npy", m, k, a);
  write_npy(dir + "/b.npy", k, n, b);
  write_npy(dir + "/d.npy", m, n, out);
  std::printf("probe: MXFP8 %zux%zux%zu on the tensor cores, written to %s\n", m, k, n, dir.c_str());
  return 0;
}
