// drift bench cast: values per second of the span cast, scalar twin (round_to per element, one
// thread) against the Highway SIMD path on one thread and on all OpenMP threads, and the SIMD path
// on one thread as a ratio to plain copies of the same span (SIMD loads and stores on the same
// target; memcpy, which may move large spans with fast-string or non-temporal stores that skip the
// read-for-ownership of the destination), same inputs, same run. Every SIMD result is checked bit for bit against the scalar twin before it is timed.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <strings.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/random.h"
#include "backend/timing.h"
#include "cli/commands.h"
#include "hwy/targets.h"

namespace drift::cli {
namespace {

struct CastBenchOptions {
  std::vector<size_t> sizes = {size_t{1} << 20, size_t{1} << 24};
  std::vector<std::string> formats = {"bf16", "fp8_e4m3", "fp4_e2m1"};
  std::vector<std::string> modes = {"rne", "sr"};
  int sr_bits = 24;
  double min_time = 0.3;
  std::string simd_target;  // empty: the best this CPU supports
  bool json = false;
};

// Benchmark inputs, deterministic: normal(0,1) (Box-Muller on Philox words) times a power of two
// drawn uniformly from 2^-6..2^6 per value, so a span mixes magnitudes like a real tensor (some
// values underflow fp4, some clip it).
std::vector<float> bench_inputs(size_t n) {
  std::vector<float> out(n);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < static_cast<int64_t>((n + 1) / 2); ++b) {
    const auto w = philox_block(2024, 77, static_cast<uint64_t>(b));
    const double u1 = (static_cast<double>(w.v[0]) + 1.0) * 0x1p-32;  // (0, 1]
    const double u2 = static_cast<double>(w.v[1]) * 0x1p-32;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double z[2] = {r * std::cos(2 * M_PI * u2), r * std::sin(2 * M_PI * u2)};
    const int k[2] = {static_cast<int>(w.v[2] % 13) - 6, static_cast<int>(w.v[3] % 13) - 6};
    for (int j = 0; j < 2; ++j) {
      const size_t i = 2 * static_cast<size_t>(b) + static_cast<size_t>(j);
      if (i < n) out[i] = static_cast<float>(std::ldexp(z[j], k[j]));
    }
  }
  return out;
}

template <typename T>
std::vector<T> parse_list(const std::string& text, const char* what, T (*conv)(const std::string&)) {
  std::vector<T> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(conv(item));
  if (out.empty()) throw InputError(std::string(what) + ": empty list");
  return out;
}

size_t parse_size(const std::string& s) {
  // Accepts 1048576, 1M, 16M, 64K.
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    throw InputError("--sizes: '" + s + "' is not a count (e.g. 1M, 16M, 65536)");
  }
  const std::string suffix = s.substr(pos);
  if (suffix == "K" || suffix == "k") v <<= 10;
  else if (suffix == "M" || suffix == "m") v <<= 20;
  else if (!suffix.empty()) throw InputError("--sizes: '" + s + "' has an unknown suffix (K or M)");
  if (v == 0) throw InputError("--sizes: counts must be positive");
  return static_cast<size_t>(v);
}

std::string size_label(size_t n) {
  if (n % (size_t{1} << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % (size_t{1} << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

void run_bench_cast(const CastBenchOptions& opt) {
  std::vector<std::pair<std::string, Format>> formats;
  for (const auto& name : opt.formats) {
    const auto f = find_format(name);
    if (!f) throw InputError("--formats: unknown format '" + name + "' (see `drift formats`)");
    if (!fits_float(*f)) throw InputError("--formats: '" + name + "' does not fit in float; span casts output float");
    formats.emplace_back(name, *f);
  }
  std::vector<Rounding> modes;
  for (const auto& m : opt.modes) {
    const auto r = parse_rounding(m);
    if (!r) throw InputError("--modes: unknown rounding '" + m + "' (rne rna rtz rup rdn rto sr)");
    modes.push_back(*r);
  }
  if (opt.sr_bits < 0 || opt.sr_bits > 32) throw InputError("--sr-bits must be between 0 and 32");

  if (!opt.simd_target.empty()) {
    // Restrict Highway's dispatch to one compiled target (Highway's test hook; affects this process only).
    std::string names;
    int64_t chosen = 0;
    for (int64_t t : cast_span_targets()) {
      names += std::string(names.empty() ? "" : " ") + hwy::TargetName(t);
      if (strcasecmp(hwy::TargetName(t), opt.simd_target.c_str()) == 0) chosen = t;
    }
    if (chosen == 0) throw InputError("--simd-target: '" + opt.simd_target + "' is not available here (" + names + ")");
    hwy::SetSupportedTargetsForTest(chosen);
  }
  const int threads = omp_get_max_threads();
  const std::string target = cast_span_target_name();
  nlohmann::json results = nlohmann::json::array();
  if (!opt.json) {
    std::printf("drift bench cast: SIMD target %s, %d OpenMP threads; values/s (millions), best of repeats;\n"
                "copy-1t: SIMD loads and stores of the same span, memcpy-1t: memcpy of it, both taking turns with simd-1t\n",
                target.c_str(), threads);
    std::printf("%-10s %-4s %5s %10s %10s %10s %10s %10s %9s %8s %8s %8s\n", "format", "mode", "n", "scalar-1t",
                "simd-1t", "simd-all", "copy-1t", "memcpy-1t", "simd/sc", "all/1t", "1t/copy", "1t/memcpy");
  }
  for (size_t n : opt.sizes) {
    const std::vector<float> in = bench_inputs(n);
    std::vector<float> ref(n), out(n);
    for (const auto& [fname, format] : formats) {
      const auto& f = format;  // (a structured binding cannot be captured by the lambdas below before clang 16)
      for (Rounding mode : modes) {
        RoundSpec spec;
        spec.mode = mode;
        spec.sr_bits = opt.sr_bits;
        const uint64_t seed = 11, stream = 3;
        CastStats s_ref, s_simd, s_par;
        const double t_scalar = best_seconds_per_call(
            [&] { s_ref = cast_span_scalar(in.data(), ref.data(), n, f, spec, seed, stream, 0); }, opt.min_time);
        // The references: plain copies of the same span (the same bytes read and written), by SIMD
        // loads and stores on the cast's target and by memcpy, their calls taking turns with the
        // cast's so that all three see the same machine load.
        const std::vector<double> t = best_seconds_alternating(
            {[&] { copy_span(in.data(), out.data(), n); },
             [&] { std::memcpy(out.data(), in.data(), n * sizeof(float)); },
             [&] { s_simd = cast_span(in.data(), out.data(), n, f, spec, seed, stream, 0); }},
            opt.min_time);
        const double t_copy = t[0], t_memcpy = t[1], t_simd = t[2];
        bool same = std::memcmp(ref.data(), out.data(), n * sizeof(float)) == 0 && s_simd == s_ref;
        std::fill(out.begin(), out.end(), 0.0f);
        const double t_par = best_seconds_per_call(
            [&] { s_par = cast_span_parallel(in.data(), out.data(), n, f, spec, seed, stream, 0); }, opt.min_time);
        same = same && std::memcmp(ref.data(), out.data(), n * sizeof(float)) == 0 && s_par == s_ref;
        if (!same)
          throw std::runtime_error("bench cast: SIMD result differs from the scalar core for " + fname + " " +
                                   to_string(mode) + " (a bug: please report)");
        const double vs = static_cast<double>(n) / t_scalar, v1 = static_cast<double>(n) / t_simd,
                     va = static_cast<double>(n) / t_par, vc = static_cast<double>(n) / t_copy,
                     vm = static_cast<double>(n) / t_memcpy;
        if (opt.json) {
          results.push_back({{"format", fname},
                             {"mode", to_string(mode)},
                             {"sr_bits", mode == Rounding::sr ? opt.sr_bits : 0},
                             {"n", n},
                             {"scalar_1t_values_per_s", vs},
                             {"simd_1t_values_per_s", v1},
                             {"simd_all_values_per_s", va},
                             {"copy_1t_values_per_s", vc},
                             {"memcpy_1t_values_per_s", vm},
                             {"simd_1t_vs_copy", v1 / vc},
                             {"simd_1t_vs_memcpy", v1 / vm},
                             {"clipped", s_ref.clipped},
                             {"flushed", s_ref.flushed},
                             {"subnormal", s_ref.subnormal},
                             {"nan", s_ref.nan}});
        } else {
          std::printf("%-10s %-4s %5s %10.1f %10.1f %10.1f %10.1f %10.1f %8.1fx %7.2fx %7.2fx %7.2fx\n",
                      fname.c_str(), to_string(mode), size_label(n).c_str(), vs * 1e-6, v1 * 1e-6, va * 1e-6,
                      vc * 1e-6, vm * 1e-6, v1 / vs, va / v1, v1 / vc, v1 / vm);
          std::fflush(stdout);
        }
      }
    }
  }
  if (opt.json) {
    nlohmann::json doc = {{"bench", "cast"}, {"simd_target", target}, {"threads", threads}, {"results", results}};
    std::printf("%s\n", doc.dump(2).c_str());
  }
}

}  // namespace

void add_bench_cast_command(CLI::App& bench) {
  auto opt = std::make_shared<CastBenchOptions>();
  auto sizes = std::make_shared<std::string>("1M,16M");
  auto formats = std::make_shared<std::string>("bf16,fp8_e4m3,fp4_e2m1");
  auto modes = std::make_shared<std::string>("rne,sr");
  auto* cmd = bench.add_subcommand(
      "cast",
      "Values/s of the fp32 -> format span cast: scalar core (1 thread) vs Highway SIMD (1 thread, all "
      "OpenMP threads), and SIMD on 1 thread as a ratio to a plain copy of the same span (SIMD loads and "
      "stores; memcpy) timed in turns with it; results are checked bit for bit before timing");
  cmd->add_option("--sizes", *sizes, "Comma-separated span lengths (K/M suffixes allowed)")->capture_default_str();
  cmd->add_option("--formats", *formats, "Comma-separated target formats (must fit in float)")->capture_default_str();
  cmd->add_option("--modes", *modes, "Comma-separated roundings: rne rna rtz rup rdn rto sr")->capture_default_str();
  cmd->add_option("--sr-bits", opt->sr_bits, "Random bits for stochastic rounding (0..32)")->capture_default_str();
  cmd->add_option("--min-time", opt->min_time, "Seconds of repeats per measurement (best call is reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--simd-target", opt->simd_target,
                  "Force one compiled Highway target (e.g. AVX2, SSE4, EMU128); default: the best supported");
  cmd->add_flag("--json", opt->json, "Print JSON instead of a table");
  cmd->callback([opt, sizes, formats, modes] {
    opt->sizes = parse_list<size_t>(*sizes, "--sizes", parse_size);
    opt->formats = parse_list<std::string>(*formats, "--formats", [](const std::string& s) { return s; });
    opt->modes = parse_list<std::string>(*modes, "--modes", [](const std::string& s) { return s; });
    run_bench_cast(*opt);
  });
}

}  // namespace drift::cli
