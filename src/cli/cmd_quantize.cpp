// drift quantize: one operand quantizer (a preset or a JSON QUANT object) applied to an array;
// writes the dequantised values q * block_scale * tensor_scale and prints the statistics as JSON.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "arith/quantize.h"
#include "cli/commands.h"
#include "io/npy.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"

namespace drift::cli {

// From cmd_matmul.cpp.
nlohmann::ordered_json quant_stats_json(const QuantStats& s);
io::Array read_input_array(const std::string& path, const char* option);
void check_output_file_option(const std::string& out);
io::Dtype parse_out_dtype(const std::string& s);

namespace {

struct QuantizeOptions {
  std::string in, out, quantizer, out_dtype = "f8";
  int axis = -1;
  uint64_t seed = 0;
};

void run_quantize(const QuantizeOptions& o) {
  const io::Dtype dtype = parse_out_dtype(o.out_dtype);
  const Quantizer qz = parse_quantizer(parse_json_argument(o.quantizer, "quantizer"), "quantizer");
  check_output_file_option(o.out);
  const io::Array x = read_input_array(o.in, "--in");
  const int ndim = static_cast<int>(x.shape.size());
  if (o.axis < -ndim || o.axis >= ndim)
    throw InputError("--axis: " + std::to_string(o.axis) + " is out of range for a " + std::to_string(ndim) +
                     "-D array (expected " + (ndim == 1 ? "0" : "0 or 1") + ", or -1 for the last axis)");
  const int axis = o.axis < 0 ? o.axis + ndim : o.axis;
  // The quantizer's layout is rows x k with k (the block axis) contiguous; axis 0 of a 2-D array
  // is brought there by a transpose, and the result transposed back.
  const bool transpose = ndim == 2 && axis == 0;
  const size_t sr = x.rows(), sc = x.cols();
  const size_t rows = transpose ? sc : sr, k = transpose ? sr : sc;
  std::vector<double> buf;
  const double* src = x.data.data();
  if (transpose) {
    buf.resize(rows * k);
    for (size_t r = 0; r < sr; ++r)
      for (size_t c = 0; c < sc; ++c) buf[c * k + r] = x.data[r * sc + c];
    src = buf.data();
  }
  DelayedState state;  // one call: delayed scaling uses its initial scale (1), as on TE's first step
  QuantizedOperand q = quantize(src, rows, k, k, qz, o.seed, 0, &state);
  io::Array y;
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < k; ++i) {
      const double v = q.dequant(r, i);
      if (transpose) y.data[i * sc + r] = v;
      else y.data[r * k + i] = v;
    }
  try {
    io::write_array(o.out, y, dtype);
  } catch (const io::IoError& e) {
    throw InputError(std::string("--out: ") + e.what());
  }
  nlohmann::ordered_json j = quant_stats_json(q.stats);
  j["rows"] = rows;
  j["k"] = k;
  j["axis"] = axis;
  j["block_k"] = q.block_k;
  j["tensor_scale"] = q.tensor_scale;
  j["out"] = {{"file", o.out}, {"dtype", dtype == io::Dtype::f4 ? "float32" : "float64"}};
  j["seed"] = o.seed;
  j["quantizer"] = nlohmann::ordered_json::parse(quantizer_to_json(qz).dump());
  std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  auto* cmd = app.add_subcommand(
      "quantize",
      "Quantize an array with one operand quantizer; writes the dequantised values (q * scales) and prints "
      "the statistics as JSON. Quantizers: a catalogue format (plain cast), or " + quantizer_preset_list() +
          ", or a JSON object (docs/policy.md)");
  cmd->add_option("--in", o->in, "Input: .npy (float32/float64, 1-D or 2-D) or a text matrix")->required();
  cmd->add_option("--out", o->out, "Output: .npy, else a text matrix (written atomically)")->required();
  cmd->add_option("--quantizer", o->quantizer, "A quantizer preset name, a JSON QUANT object, or @file.json")
      ->required();
  cmd->add_option("--axis", o->axis,
                  "The block (reduction, K) axis: 1 or -1 (default, the last) keeps rows as they are; 0 quantizes "
                  "along columns of a 2-D array")
      ->capture_default_str();
  cmd->add_option("--out-dtype", o->out_dtype, "f8 (float64) | f4 (float32)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of stochastic rounding")
      ->check(non_negative_seed())->capture_default_str();
  cmd->callback([o] { run_quantize(*o); });
}

}  // namespace drift::cli
