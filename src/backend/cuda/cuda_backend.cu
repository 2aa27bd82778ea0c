// The "cuda" backend: operands quantized on the CPU by the engine's quantizers (the same code, so
// the same values and telemetry), then the products and sums of the definition on the GPU:
//   * the float fast kernel where fast_plan_applies (fp32 rne sequential sums, finite values) and
//     swamping is not being counted; a non-finite value sends the call to the element kernel;
//   * otherwise the element kernel: matmul_element per thread (every accumulator, order, product
//     rounding, fused tensor-core model and stochastic rounding), counting adds and swamping as the
//     reference does.
#include "backend/cuda/cuda_backend.h"


#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/native_fp8.h"
#include "backend/matmul_plan.h"
#include "backend/timing.h"

namespace drift {

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device present";
  return n;
}

namespace {

using cuda::check;
using cuda::DeviceBuffer;

class CudaBackend final : public Backend {
 public:
  CudaBackend() { check(cudaSetDevice(0), "cudaSetDevice(0)"); }
  const char* name() const override { return "cuda"; }
  // Every policy the engine accepts runs bit-identically: operands are quantized on the CPU by the
  // engine's own quantizers (every scaling kind; no GPU quantizer exists yet), and the element
  // kernel is the definition for every accumulator, order and tensor-core model.
  std::string unsupported_reason(const MatmulPolicy& policy) const override { return validate_policy(policy); }

  MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    if (auto err = validate_policy(policy); !err.empty()) throw std::invalid_argument("matmul policy: " + err);
    prepare_operands_into(ops_, a, b, policy, ctx);
    MatmulTelemetry tel;
    tel.a = ops_.a.stats;
    tel.b = ops_.b.stats;
    run_prepared(ops_, policy, ctx, tel, /*fast_allowed=*/true);
    const size_t m = ops_.a.rows, n = ops_.b.rows;
    host_c_.resize(m * n);
    dc_.download(host_c_.data(), m * n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = host_c_[i * n + j];
    return tel;
  }

  // Runs the prepared call into dc_ (m x n on the device). Returns whether the fast kernel produced it.
  bool run_prepared(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx,
                    MatmulTelemetry& tel, bool fast_allowed) {
    const size_t m = ops.a.rows, n = ops.b.rows, k = ops.a.k;
    dc_.resize(m * n);
    if (m == 0 || n == 0) return false;
    if (fast_allowed && !ctx.count_swamping && fast_plan_applies(ops, policy)) {
      upload_fast(ops, policy, ctx);
      if (launch_fast()) {
        tel.inner_adds += m * n * k;
        tel.outer_adds += m * n * fast_plan_.nblocks;
        tel.swamping_counted = false;
        tel.fast_path = true;
        return true;
      }
    }
    upload_general(ops, policy, ctx);
    launch_general(tel);
    return false;
  }

  // The device side of the two paths, split from the uploads so that bench can time kernels alone.
  void upload_fast(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx) {
    fast_plan_ = make_fast_plan(ops, policy, ctx, fast_host_);
    da_f_.upload(fast_host_.a);
    db_f_.upload(fast_host_.b);
    dsa_f_.upload(fast_host_.sa);
    dsb_f_.upload(fast_host_.sb);
    fast_plan_.a = da_f_.get();
    fast_plan_.b = db_f_.get();
    fast_plan_.sa = fast_plan_.sa ? dsa_f_.get() : nullptr;
    fast_plan_.sb = fast_plan_.sb ? dsb_f_.get() : nullptr;
    flag_.resize(1);
  }
  bool launch_fast() {
    check(cudaMemset(flag_.get(), 0, sizeof(int)), "cudaMemset");
    cuda::launch_fast_kernel(fast_plan_, dc_.get(), flag_.get(), nullptr);
    int nonfinite = 0;
    flag_.download(&nonfinite, 1);  // synchronises; reports kernel faults
    return nonfinite == 0;
  }
  void upload_general(const PreparedOperands& ops, const MatmulPolicy& policy, const MatmulContext& ctx) {
    plan_ = make_element_plan(ops, policy, ctx, orders_);
    da_.upload(ops.a.q);
    db_.upload(ops.b.q);
    dsa_.upload(ops.a.block_scale);
    dsb_.upload(ops.b.block_scale);
    dinner_.upload(orders_.inner_order);
    douter_.upload(orders_.outer_order);
    plan_.a = da_.get();
    plan_.b = db_.get();
    plan_.a_scale = plan_.a_scale ? dsa_.get() : nullptr;
    plan_.b_scale = plan_.b_scale ? dsb_.get() : nullptr;
    plan_.inner_order = plan_.inner_order ? dinner_.get() : nullptr;
    plan_.outer_order = plan_.outer_order ? douter_.get() : nullptr;
  }
  // Counts adds and swamped adds always (a few registers per thread, four atomics at the end), so
  // the telemetry is the reference path's whatever the caller asked.
  void launch_general(MatmulTelemetry& tel) {
    counts_.resize(4);
    check(cudaMemset(counts_.get(), 0, 4 * sizeof(unsigned long long)), "cudaMemset");
    cuda::launch_element_kernel(plan_, dc_.get(), counts_.get(), nullptr);
    unsigned long long h[4] = {0, 0, 0, 0};
    counts_.download(h, 4);  // synchronises; reports kernel faults
    tel.inner_adds += h[0];
    tel.inner_swamped += h[1];
    tel.outer_adds += h[2];
    tel.outer_swamped += h[3];
  }

  PreparedOperands ops_;

 private:
  std::vector<double> host_c_;
  ElementPlan plan_;
  ElementPlanStorage orders_;
  FastPlan fast_plan_;
  FastPlanStorage fast_host_;
  DeviceBuffer<double> da_, db_, dsa_, dsb_, dc_;
  DeviceBuffer<float> da_f_, db_f_, dsa_f_, dsb_f_;
  DeviceBuffer<uint32_t> dinner_, douter_;
  DeviceBuffer<unsigned long long> counts_;
  DeviceBuffer<int> flag_;
};

void require_device(const char* backend) {
  std::string why;
  if (cuda_device_count(&why) == 0)
    throw BackendError(std::string("backend '") + backend + "': no usable GPU (" + why + ")" +
                       (std::string(backend) == "cuda" ? "; backend 'cpu' gives the same results" : ""));
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(bool native, bool fast_accum) {
  require_device(native ? (fast_accum ? "cuda-native-fastacc" : "cuda-native") : "cuda");
  if (native) return make_native_fp8_backend(fast_accum);
  return std::make_unique<CudaBackend>();
}

CudaGemmTiming time_cuda_matmul(const MatView& a, const MatView& b, const MatmulPolicy& policy, double min_seconds) {
  require_device("cuda");
  CudaBackend be;
  CudaGemmTiming t;
  std::vector<double> c(a.rows * b.cols);
  MatmulContext ctx;
  t.call_s = seconds_per_call([&] { be.matmul(a, b, c.data(), b.cols, policy, ctx); }, min_seconds);
  // Kernel alone: operands prepared and uploaded once, then only the launches (each waits for its result).
  MatmulTelemetry tel;
  t.fast = be.run_prepared(be.ops_, policy, ctx, tel, true);
  if (t.fast) {
    t.kernel_s = seconds_per_call([&] { be.launch_fast(); }, min_seconds);
  } else {
    t.kernel_s = seconds_per_call([&] { be.launch_general(tel); }, min_seconds);
  }
  return t;
}

}  // namespace drift
