// Named tensor-core accumulation models: which GPU, which input and output formats, and the fused
// multi-term parameters (arith/fused_accum.h) published for it, with the source of each.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arith/fused_accum.h"

namespace drift {

struct TcPreset {
  std::string name;     // e.g. "h100_fp16_out16"
  std::string aliases;  // space-separated other names
  std::string gpu;      // "V100", "A100", "H100", ...
  std::string input;    // catalogue name of the input format (fp16, bf16, tf32, fp8_e4m3, fp8_e5m2)
  std::string output;   // catalogue name of the output/accumulator format (fp32 or fp16)
  Format in_format;     // derived catalogue formats
  Format out_format;
  FusedModel model;     // model.out == out_format; model.in_emin == in_format.emin, or the emin of the
                        // format the inputs are unpacked to (Hopper's emulated FP8 mma.sync: fp16)
  int neab = 0;         // the published "extra alignment bits" (kept_bits = 23 + neab)
  std::string source;   // where the parameters are published
  std::string doc;      // the parameters in words and what validates them
  // The measured vectors it reproduces bit for bit (tests/test_tensorcore.cpp); empty when no
  // vectors for it ship with drift.
  std::string validated;
};

// Every preset, in display order.
const std::vector<TcPreset>& tc_presets();
// A preset by name or alias, or nullopt.
std::optional<TcPreset> find_tc_preset(std::string_view name);
// The preset for the same GPU and input with the given output format (e.g. v100_fp16 with "fp16"
// gives v100_fp16_out16), or nullopt when the hardware has no such combination here.
std::optional<TcPreset> tc_preset_with_output(const TcPreset& p, std::string_view output);

}  // namespace drift
