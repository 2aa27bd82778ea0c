// drift bench gemm: GFLOP/s (2*M*N*K per call) of the engine under several policies, and of
// OpenBLAS cblas_sgemm on the same shapes in the same run; each policy is reported as a ratio.
// With --backend cuda: the CUDA backend's device matmul (operands quantized and resident, the kernel
// alone) and its whole call (input copies, device quantization, copy back), against cuBLAS fp32 SGEMM
// (no TF32) on the same GPU in the same run.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "arith/tc_presets.h"
#include "backend/backend.h"
#include "backend/timing.h"
#include "cli/bench_operands.h"
#include "cli/blas_reference.h"
#include "cli/commands.h"
#include "cli/fma_peak.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"

#ifdef DRIFT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace drift::cli {
namespace {

struct BenchShape {
  size_t m, n, k;
};

struct BenchPolicy {
  std::string name;
  MatmulPolicy policy;
};

// The bench policies, as policy JSON (the same schema and presets a training config uses).
const std::pair<const char*, const char*> kBenchPolicies[] = {
    {"fp32", R"("fp32")"},
    {"fp8_e4m3-fp32acc", R"({"preset": "fp32", "a": {"format": "fp8_e4m3"}, "b": {"format": "fp8_e4m3"}})"},
    {"mxfp8_e4m3", R"("mxfp8_e4m3")"},
    {"nvfp4", R"("nvfp4")"},
    {"bf16acc-rne", R"({"preset": "bf16", "inner": {"format": "bf16", "rounding": "rne"}})"},
    {"fp16acc-rtz", R"({"preset": "fp32", "a": {"format": "fp16"}, "b": {"format": "fp16"},
                        "inner": {"format": "fp16", "rounding": "rtz"}})"},
    {"h100_fp8", R"({"preset": "fp32", "a": {"format": "fp8_e4m3"}, "b": {"format": "fp8_e4m3"},
                     "inner": {"fused": "h100_fp8_e4m3"}})"},
    {"h100_fp8_promote128", R"({"preset": "fp32", "a": {"format": "fp8_e4m3"}, "b": {"format": "fp8_e4m3"},
                                "inner": {"fused": "h100_fp8_e4m3", "promote_every": 128}})"},
    {"a100_fp16", R"({"preset": "fp32", "a": {"format": "fp16"}, "b": {"format": "fp16"},
                      "inner": {"fused": "a100_fp16"}})"},
    {"h100_bf16", R"({"preset": "fp32", "a": {"format": "bf16"}, "b": {"format": "bf16"},
                      "inner": {"fused": "h100_bf16"}})"},
    {"h100_fp16_out16", R"({"preset": "fp32", "a": {"format": "fp16"}, "b": {"format": "fp16"},
                            "inner": {"fused": "h100_fp16_out16"}})"},
};

BenchPolicy bench_policy(const char* name, const std::string& json) {
  return {name, parse_matmul_policy(nlohmann::json::parse(json), std::string("bench.") + name)};
}

// A --policies name: a bench policy above; else a tensor-core preset (or alias), its operands plain
// casts to the preset's input format and its inner sum the fused model, as in h100_fp16_out16 above;
// else a matmul preset (docs/policy.md). So every model issue 20's speed target names can be timed.
std::optional<BenchPolicy> bench_policy_named(const std::string& name) {
  for (const auto& [bench_name, json] : kBenchPolicies)
    if (name == bench_name) return bench_policy(bench_name, json);
  if (const auto tc = find_tc_preset(name)) {
    const nlohmann::json j = {{"preset", "fp32"},
                              {"a", {{"format", tc->input}}},
                              {"b", {{"format", tc->input}}},
                              {"inner", {{"fused", tc->name}}}};
    return bench_policy(name.c_str(), j.dump());
  }
  if (const auto p = find_matmul_preset(name)) return BenchPolicy{name, *p};
  return std::nullopt;
}

std::vector<BenchPolicy> bench_policies(const std::vector<std::string>& names) {
  std::vector<BenchPolicy> out;
  if (names.empty()) {
    for (const auto& [name, json] : kBenchPolicies) out.push_back(bench_policy(name, json));
    return out;
  }
  for (const auto& name : names) {
    if (name == "tensorcore") {  // every tensor-core preset, in display order
      for (const auto& tc : tc_presets()) out.push_back(*bench_policy_named(tc.name));
      continue;
    }
    auto bp = bench_policy_named(name);
    if (!bp)
      throw InputError("--policies: '" + name +
                       "' is neither a bench policy, a tensor-core preset (drift tcverify --list), "
                       "'tensorcore' (all of them), nor a matmul preset (" + matmul_preset_list() + ")");
    out.push_back(std::move(*bp));
  }
  return out;
}

struct BenchOptions {
  std::vector<std::string> policies;
  std::vector<std::string> shapes;
  double min_seconds = 0.5;
  bool json = false;
  std::string backend = "cpu";
};

BenchShape parse_shape(const std::string& s) {
  BenchShape sh{};
  if (std::sscanf(s.c_str(), "%zux%zux%zu", &sh.m, &sh.n, &sh.k) != 3 || !sh.m || !sh.n || !sh.k)
    throw InputError("--shapes: expected MxNxK (e.g. 512x512x512), got '" + s + "'");
  return sh;
}

#ifdef DRIFT_HAVE_CUDA
// The CUDA rows: per shape, cuBLAS SGEMM once, then every policy's kernel and whole-call rates.
void run_bench_gemm_cuda(const BenchOptions& o, const std::vector<BenchShape>& shapes,
                         const std::vector<BenchPolicy>& policies) {
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json)
    std::printf("%-20s %-16s %12s %12s %14s %8s %s\n", "policy", "shape MxNxK", "kernel GF/s", "call GF/s",
                "cublas sgemm", "ratio", "path");
  for (const auto& sh : shapes) {
    const std::vector<float> af = bench_operand(1, sh.m * sh.k), bf = bench_operand(2, sh.k * sh.n);
    const std::vector<double> ad(af.begin(), af.end()), bd(bf.begin(), bf.end());
    const double flops = 2.0 * sh.m * sh.n * sh.k;
    const MatView av{ad.data(), sh.m, sh.k, sh.k, false};
    const MatView bv{bd.data(), sh.k, sh.n, sh.n, false};
    const double sgemm = flops / time_cublas_sgemm(sh.m, sh.n, sh.k, o.min_seconds) * 1e-9;
    char shape[64];
    std::snprintf(shape, sizeof shape, "%zux%zux%zu", sh.m, sh.n, sh.k);
    for (const auto& bp : policies) {
      const CudaGemmTiming t = time_cuda_matmul(av, bv, bp.policy, o.min_seconds);
      const double kernel = flops / t.kernel_s * 1e-9, call = flops / t.call_s * 1e-9;
      const char* path = t.path;
      if (!o.json)
        std::printf("%-20s %-16s %12.1f %12.1f %14.1f %8.3f %s\n", bp.name.c_str(), shape, kernel, call, sgemm,
                    kernel / sgemm, path);
      std::fflush(stdout);
      rows.push_back({{"backend", "cuda"}, {"policy", bp.name}, {"m", sh.m}, {"n", sh.n}, {"k", sh.k},
                      {"kernel_gflops", kernel}, {"call_gflops", call}, {"cublas_sgemm_gflops", sgemm},
                      {"ratio", kernel / sgemm}, {"path", path}});
    }
  }
  if (o.json) std::printf("%s\n", rows.dump(2).c_str());
}
#endif

void run_bench_gemm(const BenchOptions& o) {
  std::vector<BenchShape> shapes;
  if (o.shapes.empty()) shapes = {{64, 256, 256}, {256, 1024, 256}, {512, 512, 512}, {1024, 1024, 1024}};
  for (const auto& s : o.shapes) shapes.push_back(parse_shape(s));
  const std::vector<BenchPolicy> policies = bench_policies(o.policies);
  if (o.backend == "cuda") {
#ifdef DRIFT_HAVE_CUDA
    try {
      run_bench_gemm_cuda(o, shapes, policies);
    } catch (const BackendError& e) {
      throw InputError(std::string("--backend cuda: ") + e.what());
    }
    return;
#else
    throw InputError("--backend cuda: this drift was built without CUDA (DRIFT_CUDA=OFF or no nvcc)");
#endif
  }
  if (o.backend != "cpu") throw InputError("--backend: expected cpu or cuda, got '" + o.backend + "'");
  // sgemm on as many threads as the engine's OpenMP team, whatever OpenBLAS read from the environment.
  const int threads = omp_get_max_threads();
  const int blas_threads = use_blas_threads(threads);
  nlohmann::json rows = nlohmann::json::array();
  const double peak = fma_peak_gflops(std::min(0.2, o.min_seconds));
  if (!o.json) {
    std::printf("%s\n", openblas_reference_line().c_str());
    std::printf("%s\n", fma_peak_line(peak).c_str());
    std::printf("%-18s %-16s %12s %12s %8s %8s %s\n", "policy", "shape MxNxK", "GFLOP/s", "sgemm GF/s", "ratio",
                "of peak", "path");
  }
  for (const auto& sh : shapes) {
    std::vector<float> af = bench_operand(1, sh.m * sh.k), bf = bench_operand(2, sh.k * sh.n);
    const double flops = 2.0 * sh.m * sh.n * sh.k;
    // The engine reads the same float operands OpenBLAS does, through the float entry the models use
    // (every bench policy's output fits a float, so C is exactly what the double entry writes).
    std::vector<float> c(sh.m * sh.n);
    MatViewF av{af.data(), sh.m, sh.k, sh.k, false};
    MatViewF bv{bf.data(), sh.k, sh.n, sh.n, false};
    // The engine is timed before OpenBLAS: OpenBLAS's worker threads keep spinning for a while after
    // a call and would steal the cores from whatever runs next.
    struct Timed {
      const BenchPolicy* bp;
      double seconds;
      bool fast;
    };
    std::vector<Timed> timed;
    MatmulWorkspace workspace;  // reused across the timed calls, as the training loop's sites do
    for (const auto& bp : policies) {
      bool fast = false;
      const double t = seconds_per_call(
          [&] {
            MatmulContext ctx;
            ctx.workspace = &workspace;
            fast = matmul(av, bv, c.data(), sh.n, bp.policy, ctx).fast_path;
          },
          o.min_seconds);
      timed.push_back({&bp, t, fast});
    }
    std::vector<float> cf(sh.m * sh.n);
    const double t_blas = sgemm_seconds_per_call(af.data(), bf.data(), cf.data(), sh.m, sh.n, sh.k, o.min_seconds);
    const double sgemm_gflops = t_blas > 0 ? flops / t_blas * 1e-9 : 0;
    for (const auto& [bpp, t, fast] : timed) {
      const BenchPolicy& bp = *bpp;
      const double gflops = flops / t * 1e-9;
      const double ratio = sgemm_gflops > 0 ? gflops / sgemm_gflops : 0;
      // The multiply-add peak of as many cores as threads: how near the hardware a policy runs,
      // whatever the machine's phase (fp32's one multiply-add a product can at most reach 1).
      const double of_peak = gflops / (peak * threads);
      char shape[64];
      std::snprintf(shape, sizeof shape, "%zux%zux%zu", sh.m, sh.n, sh.k);
      if (!o.json)
        std::printf("%-18s %-16s %12.2f %12.2f %8.3f %8.3f %s\n", bp.name.c_str(), shape, gflops, sgemm_gflops, ratio,
                    of_peak, fast ? "fast" : "reference");
      std::fflush(stdout);
      rows.push_back({{"policy", bp.name}, {"m", sh.m}, {"n", sh.n}, {"k", sh.k}, {"gflops", gflops},
                      {"sgemm_gflops", sgemm_gflops}, {"sgemm_core", openblas_core()},
                      {"sgemm_threads", blas_threads}, {"threads", threads}, {"ratio", ratio},
                      {"fma_peak_gflops", peak}, {"of_peak", of_peak},
                      {"path", fast ? "fast" : "reference"}});
    }
  }
  if (o.json) std::printf("%s\n", rows.dump(2).c_str());
}

}  // namespace

void add_bench_gemm_command(CLI::App& bench) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = bench.add_subcommand("gemm", "GFLOP/s of the matmul engine per policy, as a ratio to OpenBLAS sgemm");
  cmd->add_option("--policies", o->policies,
                  "Policies to run (default: the bench policies fp32 fp8_e4m3-fp32acc mxfp8_e4m3 nvfp4 bf16acc-rne "
                  "fp16acc-rtz h100_fp8 h100_fp8_promote128 a100_fp16 h100_bf16 h100_fp16_out16). Also any "
                  "tensor-core preset (operands cast to its input format, its fused inner sum), 'tensorcore' "
                  "for all of them, or a matmul preset");
  cmd->add_option("--shapes", o->shapes, "Shapes MxNxK (default 64x256x256 256x1024x256 512x512x512 1024x1024x1024)");
  cmd->add_option("--min-seconds", o->min_seconds, "Minimum timed seconds per measurement")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON rows instead of a table");
  cmd->add_option("--backend", o->backend,
                  "cpu (ratio to OpenBLAS sgemm) | cuda (device kernel and whole call, ratio to cuBLAS SGEMM)")
      ->capture_default_str();
  cmd->callback([o] { run_bench_gemm(*o); });
}

}  // namespace drift::cli
