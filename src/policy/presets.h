// Named matmul policies and operand quantizers: a table of data, each entry stating what it models
// and where the recipe comes from. Each preset is written in the same JSON schema users write
// (matmul_json.h), so a preset is also an example of a config.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arith/matmul.h"

namespace drift {

struct MatmulPreset {
  const char* name;
  const char* doc;   // what it models, and its source
  const char* json;  // the policy, in the schema of matmul_json.h (never uses "preset")
};

// Every matmul preset, in display order.
const std::vector<MatmulPreset>& matmul_presets();
std::optional<MatmulPolicy> find_matmul_preset(std::string_view name);
// "fp32, bf16, ..." for messages and --help.
std::string matmul_preset_list();

// Quantizer presets, for `drift quantize` and for QUANT values given as a string:
//   "<matmul preset>"    the a-operand quantizer of that matmul preset
//   "<matmul preset>.a"  the same;  "<matmul preset>.b"  its b-operand quantizer
//   "<catalogue format>" a plain cast: rne, saturating, no scaling (when no matmul preset has that name)
std::optional<Quantizer> find_quantizer_preset(std::string_view name);
std::string quantizer_preset_list();

}  // namespace drift
