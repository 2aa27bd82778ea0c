// The "cuda" backend: operands quantized on the GPU by the quantize kernels (device_quantizer.h:
// every scaling kind — none, tensor, delayed, MX block 1-D and 2-D with every exponent rule, tile,
// NVFP4 — and the random Hadamard transform, stochastic rounding of elements included; the same
// values, scales, telemetry and delayed-scaling state as the CPU's quantize_into, proven on the host
// by tests/test_backend_quantize.cpp), left on the device, then the products and sums of the
// definition on the GPU:
//   * the float fast kernel where fast_policy_applies (fp32 rne sequential sums), both operands are
//     finite and swamping is not being counted; a non-finite value sends the call to the element kernel;
//   * otherwise the element kernel: matmul_element per thread (every accumulator, order, product
//     rounding, fused tensor-core model and stochastic rounding), counting adds and swamping as the
//     reference does; for the fused tensor-core models with a sequential outer sum, its tiled forms
//     (fused_tile_kernels.cu: the same arithmetic, the operands staged in shared memory, for the
//     models exact in float or double register-blocked over 4 x 4 outputs per thread).
// Constructed with quantize_on_device = false, the operands are quantized on the CPU by the engine's
// own quantizers and uploaded instead (the tests and `drift bench` compare the two; results identical).
#include "backend/cuda/cuda_backend.h"

#include <algorithm>

#include "arith/quantize_workspace.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_quantizer.h"
#include "backend/cuda/fused_tile_kernels.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/native_fp8.h"
#include "backend/cuda/quantize_kernels.h"
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
  explicit CudaBackend(bool quantize_on_device) : on_device_(quantize_on_device) {
    check(cudaSetDevice(0), "cudaSetDevice(0)");
  }
  const char* name() const override { return "cuda"; }
  // Every policy the engine accepts runs bit-identically: every quantizer runs on the device (or, when
  // asked, on the CPU), and the element kernel is the definition for every accumulator, order and
  // tensor-core model.
  std::string unsupported_reason(const MatmulPolicy& policy) const override {
    // The device quantizer keeps block scales apart; folding them into the products is the CPU's only.
    if (policy.inner.scales_in_products) return "inner.scales \"products\" runs on the cpu backend only";
    return validate_policy(policy);
  }

  MatmulTelemetry matmul(const MatView& a, const MatView& b, double* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    if (auto err = validate_policy(policy); !err.empty()) throw std::invalid_argument("matmul policy: " + err);
    // prepare_operands_into's checks, layout and random streams, with the quantization on the device.
    check_inner_dims(a, b);
    const size_t m = a.rows, k = a.cols, n = b.cols;
    const bool fast_wanted = !ctx.count_swamping && fast_policy_applies(policy);
    prepare(a_, canonical_a(a), m, k, policy.a, ctx.seed, quantize_stream_a(ctx), ctx.delayed_a, fast_wanted);
    prepare(b_, canonical_b(b), n, k, policy.b, ctx.seed, quantize_stream_b(ctx), ctx.delayed_b, fast_wanted);
    shape_.a.rows = m;
    shape_.b.rows = n;
    shape_.a.k = shape_.b.k = k;
    shape_.a.block_k = a_.block_k;
    shape_.b.block_k = b_.block_k;
    shape_.a.blocks_per_row = a_.blocks_per_row;
    shape_.b.blocks_per_row = b_.blocks_per_row;
    shape_.a.tensor_scale = a_.tensor_scale;
    shape_.b.tensor_scale = b_.tensor_scale;
    shape_.kblock = matmul_kblock(k, a_.block_k, b_.block_k, policy);
    MatmulTelemetry tel;
    tel.a = a_.stats;
    tel.b = b_.stats;
    last_fast_ = run(policy, ctx, tel, fast_wanted);
    tel.route = last_path_;
    host_c_.resize(m * n);
    dc_.download(host_c_.data(), m * n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = host_c_[i * n + j];
    return tel;
  }

  // The float entry: this backend's engine takes doubles (staged exactly, C narrowed to float).
  MatmulTelemetry matmul(const MatViewF& a, const MatViewF& b, float* c, size_t ldc, const MatmulPolicy& policy,
                         const MatmulContext& ctx) override {
    return staging_.matmul(*this, a, b, c, ldc, policy, ctx);
  }

  // The device side of the two paths, split from the quantization so that bench can time kernels alone.
  bool launch_fast() {
    check(cudaMemset(flag_.get(), 0, sizeof(int)), "cudaMemset");
    cuda::launch_fast_kernel(fast_plan_, dc_.get(), flag_.get(), nullptr);
    last_path_ = "fast";
    int nonfinite = 0;
    flag_.download(&nonfinite, 1);  // synchronises; reports kernel faults
    return nonfinite == 0;
  }
  // Counts adds and swamped adds always (a few registers per thread, four atomics at the end), so
  // the telemetry is the reference path's whatever the caller asked.
  void launch_general(MatmulTelemetry& tel) {
    counts_.resize(4);
    check(cudaMemset(counts_.get(), 0, 4 * sizeof(unsigned long long)), "cudaMemset");
    if (const int kt = cuda::fused_tile_k(plan_)) {
      last_path_ = cuda::launch_fused_tile_kernel(plan_, kt, dc_.get(), counts_.get(), nullptr);
    } else {
      cuda::launch_element_kernel(plan_, dc_.get(), counts_.get(), nullptr);
      last_path_ = "element";
    }
    unsigned long long h[4] = {0, 0, 0, 0};
    counts_.download(h, 4);  // synchronises; reports kernel faults
    tel.inner_adds += h[0];
    tel.inner_swamped += h[1];
    tel.outer_adds += h[2];
    tel.outer_swamped += h[3];
  }
  bool last_fast() const { return last_fast_; }
  // The kernel the last launch_fast / launch_general ran (CudaGemmTiming::path).
  const char* last_path() const { return last_path_; }

 private:
  // One operand into device memory, quantized where this backend quantizes.
  void prepare(cuda::DeviceOperand& op, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
               uint64_t seed, uint64_t stream, DelayedState* state, bool want_float) {
    // microxcaling's element step (scaling.emulate scale_bits / zero) is the host quantizer's only
    // (begin_quantize refuses it): such an operand is quantized by quantize_into, then uploaded.
    if (on_device_ && !qz.scaling.emulate.element_step()) {
      quantizer_.quantize(op, x, rows, k, qz, seed, stream, state, want_float);
    } else {
      quantize_into(host_q_, x, rows, k, qz, seed, stream, state, &host_qws_);
      cuda::upload_quantized(op, host_q_, qz.format, want_float);
    }
  }

  // Runs the prepared call into dc_ (m x n on the device). Returns whether the fast kernel produced it.
  bool run(const MatmulPolicy& policy, const MatmulContext& ctx, MatmulTelemetry& tel, bool fast_wanted) {
    const size_t m = shape_.a.rows, n = shape_.b.rows, k = shape_.a.k;
    dc_.resize(m * n);
    if (m == 0 || n == 0) return false;
    if (fast_wanted && a_.all_finite && b_.all_finite) {  // (both operands are in float: fast_wanted)
      fast_plan_ = make_fast_plan_shape(shape_, policy, ctx);
      fast_plan_.a = a_.qf.get();
      fast_plan_.b = b_.qf.get();
      fast_plan_.sa = kblock_scales(a_, dsa_f_);
      fast_plan_.sb = kblock_scales(b_, dsb_f_);
      flag_.resize(1);
      if (launch_fast()) {
        tel.inner_adds += m * n * k;
        tel.outer_adds += m * n * fast_plan_.nblocks;
        tel.swamping_counted = false;
        tel.fast_path = true;
        return true;
      }
    }
    plan_ = make_element_plan(shape_, policy, ctx, orders_);
    plan_.a = doubles(a_);
    plan_.b = doubles(b_);
    plan_.a_scale = a_.block_k ? a_.block_scale.get() : nullptr;
    plan_.b_scale = b_.block_k ? b_.block_scale.get() : nullptr;
    dinner_.upload(orders_.inner_order);
    douter_.upload(orders_.outer_order);
    plan_.inner_order = plan_.inner_order ? dinner_.get() : nullptr;
    plan_.outer_order = plan_.outer_order ? douter_.get() : nullptr;
    launch_general(tel);
    return false;
  }

  // The fast kernel's per-K-block float scales of an operand with block scales (else nullptr).
  const float* kblock_scales(const cuda::DeviceOperand& op, cuda::DeviceBuffer<float>& out) {
    if (!op.block_k) return nullptr;
    const size_t nblocks = fast_plan_.nblocks;
    out.resize(op.rows * nblocks);
    cuda::launch_kblock_scales(op.block_scale.get(), op.rows, op.blocks_per_row, op.block_k, nblocks,
                               fast_plan_.kblock, out.get(), nullptr);
    return out.get();
  }

  // The operand's values as doubles on the device (floats widened in place of the fast path's copy).
  const double* doubles(cuda::DeviceOperand& op) {
    if (op.in_float) {
      op.q.resize(op.rows * op.k);
      cuda::launch_widen(op.qf.get(), op.q.get(), op.rows * op.k, nullptr);
      op.in_float = false;
    }
    return op.q.get();
  }

  bool on_device_;
  bool last_fast_ = false;
  const char* last_path_ = "element";
  cuda::DeviceQuantizer quantizer_;
  QuantizedOperand host_q_;           // the CPU quantizer's output (quantize_on_device off)
  QuantizeWorkspace host_qws_;        //   and its scratch
  cuda::DeviceOperand a_, b_;
  PreparedOperands shape_;            // the operands' shapes and scales only (no values): what the plans read
  std::vector<double> host_c_;
  DoubleStaging staging_;
  ElementPlan plan_;
  ElementPlanStorage orders_;
  FastPlan fast_plan_;
  DeviceBuffer<double> dc_;
  DeviceBuffer<float> dsa_f_, dsb_f_;
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

std::unique_ptr<Backend> make_cuda_backend(bool native, bool fast_accum, bool quantize_on_device) {
  require_device(native ? (fast_accum ? "cuda-native-fastacc" : "cuda-native") : "cuda");
  if (native) return make_native_fp8_backend(fast_accum);
  return std::make_unique<CudaBackend>(quantize_on_device);
}

CudaGemmTiming time_cuda_matmul(const MatView& a, const MatView& b, const MatmulPolicy& policy, double min_seconds,
                                bool quantize_on_device) {
  require_device("cuda");
  CudaBackend be(quantize_on_device);
  CudaGemmTiming t;
  std::vector<double> c(a.rows * b.cols);
  MatmulContext ctx;
  t.call_s = seconds_per_call([&] { be.matmul(a, b, c.data(), b.cols, policy, ctx); }, min_seconds);
  // Kernel alone: the operands of the last call stay quantized on the device; only the launches are
  // repeated (each waits for its result).
  t.fast = be.last_fast();
  t.path = be.last_path();
  MatmulTelemetry tel;
  if (t.fast) {
    t.kernel_s = seconds_per_call([&] { be.launch_fast(); }, min_seconds);
  } else {
    t.kernel_s = seconds_per_call([&] { be.launch_general(tel); }, min_seconds);
  }
  return t;
}

}  // namespace drift
