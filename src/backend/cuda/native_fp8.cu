#include "backend/cuda/native_fp8.h"

#include <cublasLt.h>
#include <cuda_fp8.h>

#include <string>
#include <vector>

#include "arith/codec.h"
#include "backend/cuda/device_buffer.h"

namespace drift {
namespace {

using cuda::check;
using cuda::DeviceBuffer;

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw BackendError(std::string("cuda-native: ") + what + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

bool is_format(const Format& f, int e, int m) { return f.kind == Kind::floating && f.exp_bits == e && f.man_bits == m; }
bool is_e4m3(const Format& f) { return is_format(f, 4, 3) && f.bias == 7 && f.nan == NanCode::ones; }
bool is_e5m2(const Format& f) { return is_format(f, 5, 2) && f.bias == 15 && f.nan == NanCode::ieee; }

// The scaling kinds cuBLASLt's FP8 GEMM takes (ScaleKindTraits::native_fp8), "none, tensor or delayed".
std::string native_scale_kinds() {
  std::vector<std::string> names;
  for (const ScaleKindTraits& t : kScaleKinds)
    if (t.native_fp8) names.push_back(t.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) s += i + 1 == names.size() ? " or " : ", ";
    s += names[i];
  }
  return s;
}

// Operand quantizers cuBLASLt's FP8 GEMM can take: OCP e4m3/e5m2 elements with one scale per tensor.
std::string operand_reason(const Quantizer& q, const char* name) {
  if (!is_e4m3(q.format) && !is_e5m2(q.format)) return std::string(name) + ".format must be fp8_e4m3 or fp8_e5m2";
  if (!scale_kind_traits(q.scaling.kind).native_fp8)
    return std::string(name) + ".scaling must be " + native_scale_kinds() + " (one scale per tensor)";
  return "";
}

class NativeFp8Backend final : public Backend {
 public:
  explicit NativeFp8Backend(bool fast_accum) : fast_accum_(fast_accum) {
    check(cudaSetDevice(0), "cudaSetDevice(0)");
    check_lt(cublasLtCreate(&lt_), "cublasLtCreate");
  }
  ~NativeFp8Backend() override { cublasLtDestroy(lt_); }
  const char* name() const override { return fast_accum_ ? "cuda-native-fastacc" : "cuda-native"; }
  const NativeFp8Algorithm& last_algorithm() const { return last_; }

  // Not the simulator: "supported" means cuBLASLt can run it, never that it matches the CPU.
  std::string unsupported_reason(const MatmulPolicy& p) const override {
    if (auto e = validate_policy(p); !e.empty()) return e;
    if (auto e = operand_reason(p.a, "a"); !e.empty()) return e;
    if (auto e = operand_reason(p.b, "b"); !e.empty()) return e;
    if (is_e5m2(p.a.format) && is_e5m2(p.b.format)) return "cuBLASLt has no e5m2 x e5m2 FP8 GEMM";
    if (!is_format(p.out_format, 8, 23)) return "output must be fp32 (the FP8 GEMM writes fp32)";
    return "";
  }

  // The float entry: this backend's engine takes doubles (staged exactly, C narrowed to float).
  MatmulTelemetry matmul(const MatViewF& a, const MatViewF& b, float* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    return staging_.matmul(*this, a, b, c, ldc, policy, ctx);
  }

  MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    if (auto e = unsupported_reason(policy); !e.empty()) throw BackendError("backend cuda-native: " + e);
    prepare_operands_into(ops_, a, b, policy, ctx);
    const size_t m = ops_.a.rows, n = ops_.b.rows, k = ops_.a.k;
    if (m % 16 || n % 16 || k % 16)
      throw BackendError("backend cuda-native: M, N and K must be multiples of 16 (cuBLASLt FP8), got " +
                         std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    MatmulTelemetry tel;
    tel.a = ops_.a.stats;
    tel.b = ops_.b.stats;
    tel.swamping_counted = false;
    // Column-major cuBLASLt view of the row-major product: C^T (n x m) = op(B') * op(A') with
    // B' = our B as stored (k x n column-major, transposed: "T") and A' = our A (k x m, "N").
    const std::vector<uint8_t> bytes_b = encode_all(ops_.b.q, policy.b.format);
    const std::vector<uint8_t> bytes_a = encode_all(ops_.a.q, policy.a.format);
    da_.upload(bytes_b);  // the Lt "A" operand
    db_.upload(bytes_a);  // the Lt "B" operand
    // Each scale in its own allocation (cudaMalloc alignment, whatever cuBLASLt requires of it).
    const float scale_lt_a = static_cast<float>(ops_.b.tensor_scale), scale_lt_b = static_cast<float>(ops_.a.tensor_scale);
    dscale_a_.upload(&scale_lt_a, 1);
    dscale_b_.upload(&scale_lt_b, 1);
    dd_.resize(m * n);
    workspace_.resize(kWorkspace);

    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    try {
      check_lt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
      const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
      check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t), "TRANSA");
      check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn), "TRANSB");
      const float* sa = dscale_a_.get();
      const float* sb = dscale_b_.get();
      check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa), "A scale");
      check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb), "B scale");
      const int8_t fast = fast_accum_ ? 1 : 0;
      check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), "FAST_ACCUM");
      check_lt(cublasLtMatrixLayoutCreate(&la, lt_type(policy.b.format), k, n, k), "layout A");
      check_lt(cublasLtMatrixLayoutCreate(&lb, lt_type(policy.a.format), k, m, k), "layout B");
      check_lt(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, n, m, n), "layout D");
      check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
      const size_t ws = kWorkspace;
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
               "workspace");
      cublasLtMatmulHeuristicResult_t heur{};
      int found = 0;
      check_lt(cublasLtMatmulAlgoGetHeuristic(lt_, desc, la, lb, ld, ld, pref, 1, &heur, &found), "heuristic");
      if (found == 0) throw BackendError("backend cuda-native: cuBLASLt found no FP8 algorithm for this shape");
      last_ = describe(heur.algo);
      const float alpha = 1.0f, beta = 0.0f;
      check_lt(cublasLtMatmul(lt_, desc, &alpha, da_.get(), la, db_.get(), lb, &beta, dd_.get(), ld, dd_.get(), ld,
                              &heur.algo, workspace_.get(), kWorkspace, nullptr),
               "cublasLtMatmul");
    } catch (...) {
      release(desc, la, lb, ld, pref);
      throw;
    }
    release(desc, la, lb, ld, pref);
    std::vector<float> out(m * n);
    dd_.download(out.data(), m * n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = out[i * n + j];
    return tel;
  }

 private:
  static constexpr size_t kWorkspace = 32u << 20;
  static cudaDataType_t lt_type(const Format& f) { return is_e4m3(f) ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }
  static std::vector<uint8_t> encode_all(const std::vector<double>& q, const Format& f) {
    std::vector<uint8_t> out(q.size());
    for (size_t i = 0; i < q.size(); ++i) {
      uint64_t code = 0;
      if (!encode(q[i], f, &code)) throw BackendError("backend cuda-native: a quantized value has no FP8 encoding");
      out[i] = static_cast<uint8_t>(code);
    }
    return out;
  }
  static void release(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                      cublasLtMatrixLayout_t c, cublasLtMatmulPreference_t p) {
    if (p) cublasLtMatmulPreferenceDestroy(p);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (d) cublasLtMatmulDescDestroy(d);
  }
  static NativeFp8Algorithm describe(const cublasLtMatmulAlgo_t& algo) {
    NativeFp8Algorithm d;
    const auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, auto* value) {
      size_t written = 0;
      check_lt(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, value, sizeof *value, &written), "algo config");
    };
    int32_t id = 0, splitk = 0;
    uint32_t tile = 0, reduction = 0, stages = 0, swizzle = 0, custom = 0;
    get(CUBLASLT_ALGO_CONFIG_ID, &id);
    get(CUBLASLT_ALGO_CONFIG_TILE_ID, &tile);
    get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk);
    get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction);
    get(CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages);
    get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle);
    get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom);
    d.id = id, d.tile = static_cast<int>(tile), d.splitk = splitk, d.reduction = static_cast<int>(reduction);
    d.stages = static_cast<int>(stages), d.swizzle = static_cast<int>(swizzle), d.custom = static_cast<int>(custom);
    return d;
  }

  bool fast_accum_;
  NativeFp8Algorithm last_;
  cublasLtHandle_t lt_ = nullptr;
  PreparedOperands ops_;
  DoubleStaging staging_;
  DeviceBuffer<uint8_t> da_, db_, workspace_;
  DeviceBuffer<float> dscale_a_, dscale_b_, dd_;
};

}  // namespace

NativeFp8Algorithm native_fp8_last_algorithm(const Backend& backend) {
  const auto* native = dynamic_cast<const NativeFp8Backend*>(&backend);
  return native ? native->last_algorithm() : NativeFp8Algorithm{};
}

int native_fp8_compute_capability() {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess)
    return 0;
  return 10 * major + minor;
}

std::unique_ptr<Backend> make_native_fp8_backend(bool fast_accum) { return std::make_unique<NativeFp8Backend>(fast_accum); }

}  // namespace drift
