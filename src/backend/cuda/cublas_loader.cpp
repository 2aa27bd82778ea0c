// cuBLAS and cuBLASLt, loaded when first called. Linking them normally would make every start of
// `drift` load about a gigabyte of GPU libraries (over a second per process, on machines with or
// without a GPU), though only `--backend cuda-native` and `drift bench gemm --backend cuda` use
// them. So the few entry points drift calls are defined here and forward to the real ones, found
// with dlopen/dlsym on first use; a missing library makes each call return
// CUBLAS_STATUS_NOT_INITIALIZED, which the callers report as an error.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

namespace {

void* open_first(const char* a, const char* b) {
  void* h = dlopen(a, RTLD_NOW | RTLD_LOCAL);
  return h ? h : dlopen(b, RTLD_NOW | RTLD_LOCAL);
}

void* cublas_lib() {
  static void* h = open_first("libcublas.so.13", "libcublas.so");
  return h;
}

void* cublaslt_lib() {
  static void* h = open_first("libcublasLt.so.13", "libcublasLt.so");
  return h;
}

template <typename F>
F find(void* lib, const char* name) {
  return lib ? reinterpret_cast<F>(dlsym(lib, name)) : nullptr;
}

}  // namespace

// One forwarding definition per entry point: the real function's type comes from its declaration.
#define DRIFT_FORWARD(lib, name, params, args)                                         \
  extern "C" cublasStatus_t CUBLASWINAPI name params {                                 \
    static const auto real = find<decltype(&name)>(lib(), #name);                      \
    return real ? real args : CUBLAS_STATUS_NOT_INITIALIZED;                           \
  }

DRIFT_FORWARD(cublas_lib, cublasCreate_v2, (cublasHandle_t* handle), (handle))
DRIFT_FORWARD(cublas_lib, cublasDestroy_v2, (cublasHandle_t handle), (handle))
DRIFT_FORWARD(cublas_lib, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
DRIFT_FORWARD(cublas_lib, cublasSgemm_v2,
              (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
               const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta, float* C,
               int ldc),
              (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))

DRIFT_FORWARD(cublaslt_lib, cublasLtCreate, (cublasLtHandle_t* handle), (handle))
DRIFT_FORWARD(cublaslt_lib, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmul,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
               cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
               const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
               const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream),
              (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspace_bytes,
               stream))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulAlgoGetHeuristic,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
               cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
               cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
               int* returned),
              (handle, desc, Adesc, Bdesc, Cdesc, Ddesc, pref, requested, results, returned))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulDescCreate,
              (cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale),
              (desc, compute, scale))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulDescSetAttribute,
              (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t bytes),
              (desc, attr, buf, bytes))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t* pref), (pref))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulPreferenceSetAttribute,
              (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
               size_t bytes),
              (pref, attr, buf, bytes))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatrixLayoutCreate,
              (cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
              (layout, type, rows, cols, ld))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
DRIFT_FORWARD(cublaslt_lib, cublasLtMatmulAlgoConfigGetAttribute,
              (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t bytes,
               size_t* written),
              (algo, attr, buf, bytes, written))
