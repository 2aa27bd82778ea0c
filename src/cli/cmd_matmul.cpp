// drift matmul: one matrix product through the engine, from files, with the telemetry as JSON.
// drift quantize: one operand quantizer applied to an array, writing the dequantised values.
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "arith/catalogue.h"
#include "arith/exact_dot.h"
#include "arith/matmul.h"
#include "backend/backend.h"
#ifdef DRIFT_HAVE_CUDA
#include "backend/cuda/native_fp8.h"
#endif
#include "arith/tc_presets.h"
#include "cli/commands.h"
#include "io/memory.h"
#include "io/out_dir.h"
#include "io/npy.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"

namespace drift::cli {

// Shared with cmd_quantize.cpp.
nlohmann::ordered_json quant_stats_json(const QuantStats& s);
io::Array read_input_array(const std::string& path, const char* option);
// --out of matmul and quantize: a file that can be written (checked before any work).
void check_output_file_option(const std::string& out);
void check_output_file_option(const std::string& out) {
  try {
    io::check_output_file(out, "--out");
  } catch (const io::IoError& e) {
    throw InputError(e.what());
  }
}

io::Dtype parse_out_dtype(const std::string& s);

namespace {

double frac(uint64_t n, uint64_t d) { return d ? static_cast<double>(n) / static_cast<double>(d) : 0.0; }

}  // namespace

nlohmann::ordered_json quant_stats_json(const QuantStats& s) {
  nlohmann::ordered_json scale = {{"count", s.scale_count}};
  if (s.scale_count) {
    scale["exp_min"] = s.scale_exp_min;
    scale["exp_max"] = s.scale_exp_max;
    scale["exp_mean"] = s.scale_exp_sum / static_cast<double>(s.scale_count);
    nlohmann::ordered_json hist = nlohmann::ordered_json::object();  // exponent -> number of scales
    s.scale_exp_hist.for_each([&](int e, uint64_t count) { hist[std::to_string(e)] = count; });
    scale["exp_histogram"] = hist;
  } else {
    scale["exp_min"] = scale["exp_max"] = scale["exp_mean"] = nullptr;
  }
  return {{"elements", s.elements},
          {"clipped", s.clipped},
          {"clipped_frac", frac(s.clipped, s.elements)},
          {"flushed", s.flushed},
          {"flushed_frac", frac(s.flushed, s.elements)},
          {"subnormal", s.subnormal},
          {"subnormal_frac", frac(s.subnormal, s.elements)},
          {"nonfinite", s.nonfinite},
          {"nonfinite_frac", frac(s.nonfinite, s.elements)},
          {"amax", s.amax},
          {"scale", scale}};
}

io::Array read_input_array(const std::string& path, const char* option) {
  try {
    return io::read_array(path);
  } catch (const io::IoError& e) {
    throw InputError(std::string(option) + ": " + e.what());
  }
}

io::Dtype parse_out_dtype(const std::string& s) {
  if (s == "f8" || s == "float64") return io::Dtype::f8;
  if (s == "f4" || s == "float32") return io::Dtype::f4;
  throw InputError("--out-dtype: expected f8 or f4, got '" + s + "'");
}

namespace {

struct MatmulOptions {
  std::string a, b, policy, out, out_dtype = "f8";
  bool transpose_a = false, transpose_b = false, reference = false, exact_error = false;
  uint64_t seed = 0;
  std::string backend = "cpu";
};

// A stored array as the logical matrix it stands for. 1-D arrays are a row (for A) or a column (for B).
MatView view_of(const io::Array& x, bool transpose, bool is_a) {
  size_t r = x.rows(), c = x.cols();  // stored shape; a 1-D array is 1 x K
  if (x.shape.size() == 1 && !is_a) std::swap(r, c);  // ... or, for B, K x 1
  MatView v;
  v.data = x.data.data();
  v.ld = c;
  v.rows = transpose ? c : r;
  v.cols = transpose ? r : c;
  v.transposed = transpose;
  return v;
}

// The error of C against the exact product (each element's exact dot product rounded once to fp64):
// relative error over the elements whose exact value is not zero, and the error in units of the
// output format's ulp at the exact value.
nlohmann::ordered_json exact_error_json(const MatView& a, const MatView& b, const std::vector<double>& c, const Format& out) {
  const size_t m = a.rows, k = a.cols, n = b.cols;
  // A's row i and B's column j as strided runs of the stored arrays.
  auto row = [&](size_t i) { return a.transposed ? std::pair{a.data + i, a.ld} : std::pair{a.data + i * a.ld, size_t{1}}; };
  auto col = [&](size_t j) { return b.transposed ? std::pair{b.data + j * b.ld, size_t{1}} : std::pair{b.data + j, b.ld}; };
  double max_rel = 0, sum_rel = 0, max_ulps = 0, sum_ulps = 0;
  size_t rel_count = 0, zeros = 0, nonzero_at_zero = 0, nonfinite = 0;
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      const auto [ap, as] = row(i);
      const auto [bp, bs] = col(j);
      const double e = exact_dot(ap, as, bp, bs, k), got = c[i * n + j];
      if (!std::isfinite(e) || !std::isfinite(got)) {
        ++nonfinite;
        continue;
      }
      const double err = std::fabs(got - e);
      const double ulps = err / ulp_of(e, out);
      max_ulps = std::max(max_ulps, ulps);
      sum_ulps += ulps;
      if (e == 0) {
        ++zeros;
        nonzero_at_zero += got != 0;
        continue;
      }
      const double rel = err / std::fabs(e);
      max_rel = std::max(max_rel, rel);
      sum_rel += rel;
      ++rel_count;
    }
  const size_t finite = m * n - nonfinite;
  auto num = [](double x, size_t count) { return count ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr); };
  return {{"reference", "each element's exact dot product, rounded once to fp64"},
          {"max_rel_error", num(max_rel, rel_count)},
          {"mean_rel_error", num(rel_count ? sum_rel / static_cast<double>(rel_count) : 0, rel_count)},
          {"ulp_format", format_name(out)},
          {"max_ulps", num(max_ulps, finite)},
          {"mean_ulps", num(finite ? sum_ulps / static_cast<double>(finite) : 0, finite)},
          {"exact_zeros", zeros},
          {"nonzero_where_exact_is_zero", nonzero_at_zero},
          {"nonfinite", nonfinite}};
}

// A scale block longer than K holds the whole row: legal, but not the block size the format names.
void warn_blocks_beyond_k(const MatmulPolicy& p, size_t k) {
  for (const auto& [name, q] : {std::pair{"a", &p.a}, std::pair{"b", &p.b}})
    if (scale_kind_traits(q->scaling.kind).block_in_format && static_cast<size_t>(q->scaling.block) > k)
      std::fprintf(stderr, "drift: warning: operand %s's scale block (%d elements along K) is longer than K = %zu: "
                           "each block holds a whole row, shorter than the format's block\n",
                   name, q->scaling.block, k);
}

void run_matmul(const MatmulOptions& o) {
  const io::Dtype dtype = parse_out_dtype(o.out_dtype);
  const MatmulPolicy policy = parse_matmul_policy(parse_json_argument(o.policy, "policy"), "policy");
  check_output_file_option(o.out);
  const io::Array a = read_input_array(o.a, "--a");
  const io::Array b = read_input_array(o.b, "--b");
  const MatView va = view_of(a, o.transpose_a, true);
  const MatView vb = view_of(b, o.transpose_b, false);
  if (va.cols != vb.rows)
    throw InputError("inner dimensions differ: A" + std::string(o.transpose_a ? "^T" : "") + " is " +
                     std::to_string(va.rows) + "x" + std::to_string(va.cols) + ", B" + (o.transpose_b ? "^T" : "") +
                     " is " + std::to_string(vb.rows) + "x" + std::to_string(vb.cols));
  const size_t m = va.rows, n = vb.cols;
  const uint64_t c_elements = n && m > UINT64_MAX / n ? UINT64_MAX : uint64_t{m} * n;  // (saturating)
  io::check_allocation(c_elements, sizeof(double),
                       "the product C (" + std::to_string(m) + " x " + std::to_string(n) + ", from the shapes of --a and --b)");
  warn_blocks_beyond_k(policy, va.cols);
  io::Array c;
  c.shape = {m, n};
  c.data.assign(m * n, 0.0);
  DelayedState da, db;  // one call: delayed scaling uses its initial scale (1), as on TE's first step
  MatmulContext ctx;
  ctx.seed = o.seed;
  ctx.delayed_a = &da;
  ctx.delayed_b = &db;
  ctx.force_reference = o.reference;
  ctx.count_swamping = true;  // a one-off diagnostic call: report swamping on every path
  MatmulTelemetry tel;
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(o.backend);
  } catch (const BackendError& e) {
    throw InputError(std::string("--backend: ") + e.what());
  }
  if (auto why = backend->unsupported_reason(policy); !why.empty())
    throw InputError("--backend " + o.backend + " cannot run this policy: " + why);
  if (o.reference && o.backend != "cpu") throw InputError("--reference selects a CPU path: use it with --backend cpu");
  try {
    tel = backend->matmul(va, vb, c.data.data(), n, policy, ctx);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  try {
    io::write_array(o.out, c, dtype);
  } catch (const io::IoError& e) {
    throw InputError(std::string("--out: ") + e.what());
  }
  // Key order is kept for people reading it; the resolved policy comes last.
  nlohmann::ordered_json j = {
      {"backend", o.backend},
      {"path", tel.fast_path ? "fast" : (o.backend == "cpu" ? "reference" : "general")},
      {"m", m},
      {"k", va.cols},
      {"n", n},
      {"a", quant_stats_json(tel.a)},
      {"b", quant_stats_json(tel.b)},
      {"inner", {{"adds", tel.inner_adds}, {"swamped", tel.inner_swamped}, {"swamped_frac", frac(tel.inner_swamped, tel.inner_adds)}}},
      {"outer", {{"adds", tel.outer_adds}, {"swamped", tel.outer_swamped}, {"swamped_frac", frac(tel.outer_swamped, tel.outer_adds)}}},
      {"out", {{"file", o.out}, {"dtype", dtype == io::Dtype::f4 ? "float32" : "float64"}}},
      {"seed", o.seed}};
  if (o.exact_error) j["exact_error"] = exact_error_json(va, vb, c.data, policy.out_format);
#ifdef DRIFT_HAVE_CUDA
  // cuda-native: the cuBLASLt algorithm that ran. Its split of K is part of the summation order:
  // splitk S > 1 is the policy order splitk:S (docs/cuda.md, "cuBLASLt's FP8 GEMM, bit for bit").
  if (const NativeFp8Algorithm algo = native_fp8_last_algorithm(*backend); algo.id >= 0)
    j["cublaslt"] = {{"algo", algo.id}, {"tile", algo.tile}, {"splitk", algo.splitk},
                     {"reduction_scheme", algo.reduction}, {"stages", algo.stages}, {"cta_swizzling", algo.swizzle},
                     {"custom_option", algo.custom}};
#endif
  j["policy"] = nlohmann::ordered_json::parse(policy_to_json(policy).dump());
  std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

void add_matmul_command(CLI::App& app) {
  auto o = std::make_shared<MatmulOptions>();
  auto* cmd = app.add_subcommand(
      "matmul",
      "C = A*B through the engine under a precision policy; writes C and prints the telemetry as JSON. "
      "Presets: " + matmul_preset_list());
  cmd->add_option("--a", o->a, "A (M x K): .npy (float32/float64, 1-D or 2-D) or a text matrix")->required();
  cmd->add_option("--b", o->b, "B (K x N): .npy or a text matrix")->required();
  cmd->add_flag("--transpose-a", o->transpose_a, "Use the transpose of the stored A (stored K x M)");
  cmd->add_flag("--transpose-b", o->transpose_b, "Use the transpose of the stored B (stored N x K)");
  cmd->add_option("--policy", o->policy,
                  "Matmul policy: a preset name, a JSON object (see docs/policy.md) or @file.json")
      ->required();
  cmd->add_option("--out", o->out, "Where C goes: .npy, else a text matrix (written atomically)")->required();
  cmd->add_option("--out-dtype", o->out_dtype, "f8 (float64) | f4 (float32)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of stochastic rounding and permuted orders")
      ->check(non_negative_seed())->capture_default_str();
  cmd->add_flag("--exact-error", o->exact_error,
                "Also report C's error against the exact product (each element's exact dot product, rounded once to "
                "fp64): max and mean relative error, and in ulps of the output format");
  cmd->add_flag("--reference", o->reference, "Always take the literal reference path (never the fast path)");
  cmd->add_option("--backend", o->backend,
                  "Where it runs: cpu | cuda (same bits on a GPU) | cuda-native, cuda-native-fastacc (the GPU's "
                  "real FP8 tensor cores via cuBLASLt, for comparison with the simulator)")
      ->capture_default_str();
  std::string accumulators;
  for (const auto& t : tc_presets()) accumulators += (accumulators.empty() ? "" : ", ") + t.name;
  cmd->footer("Accumulator (tensor-core) presets, for a policy's \"inner\": {\"fused\": NAME}: " + accumulators +
              " (drift tcverify --list describes each: GPU, input and output formats, the model's parameters and "
              "their source).");
  cmd->callback([o] { run_matmul(*o); });
}

}  // namespace drift::cli
