// The policy layer's view of one matmul: JSON in, the engine's structs out (arith knows no JSON).
//
// Schema of a matmul policy (docs/policy.md has the long form). A policy is either a preset name
// (a JSON string, e.g. "mxfp8_e4m3") or an object; every key is optional and unknown keys are errors.
//
//   POLICY  = { "preset":  <matmul preset name>   base to start from (default: all fp32, see below);
//                                                 the other keys then override it field by field
//               "a": QUANT, "b": QUANT,           operand quantizers (a: M x K, b: K x N)
//               "product": ROUND | null,          products rounded to a format (null: exact)
//               "inner": ACC, "outer": ACC,       sums within a K-block / across K-blocks
//               "output": ROUND }                 C rounded to this
//   ROUND   = { "format": FORMAT, "rounding": rne|rna|rtz|rup|rdn|rto|sr,
//               "overflow": saturate|ieee, "subnormals": keep|flush, "sr_bits": 1..32 }
//   QUANT   = ROUND fields + { "preset": <quantizer preset name> (base for this operand),
//               "scaling": { "kind": none|tensor|delayed|block|tile|nvfp4,
//                            "block": >=1, "two_d": bool, "rule": floor|rceil|ceil|even, "offset": int,
//                            "margin": int, "pow2": bool, "amax_floor": >0, "history": >=1,
//                            "algo": max|most_recent, "hadamard": 0|16|32, "hadamard_seed": uint } }
//             A quantizer may also be a string: a quantizer preset name (see presets.h).
//   ACC     = ROUND fields + { "order": sequential|reverse|pairwise|split|permuted|"split:S"|"splitk:S",
//               "promote_every": >=0 (inner: K-block when no operand has block scales; 0 = all of K),
//               "fused": null | <tensor-core preset name, arith/tc_presets.h> | FUSED (inner only) }
//   FUSED   = { "preset": <tc preset name> (base), "terms", "kept_bits", "align_includes_acc", "sticky",
//               "carry_bits", "final_rounding", "out_man_bits", "out": FORMAT, "in_emin",
//               "in_subnormals", "out_subnormals", "min_align_exp": int|null, "promote_every" }
//             (FusedModel's fields, arith/fused_accum.h; printed as the preset name when it is one)
//   FORMAT  = a catalogue name (`drift formats`) or
//             { "exp_bits": 1..11, "man_bits": 0..52, "bias": int (default 2^(exp_bits-1)-1),
//               "inf": bool (default false), "nan": none|ieee|ones|negzero (default none),
//               "subnormals": bool (default true) }
//
// Overrides merge: `{"preset": "mxfp8_e4m3", "a": {"rounding": "sr"}}` changes only a's rounding.
// Changing "scaling.kind" starts that operand's scaling afresh from the kind's defaults (block 32
// for block, 128 for tile, 16 for nvfp4) before the other scaling keys apply.
// Without a preset the base is MatmulPolicy(): fp32 operands (rne, saturate), exact products,
// fp32 rne sequential sums (IEEE overflow), fp32 output.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "arith/matmul.h"
#include "policy/config_error.h"

namespace drift {

// A matmul policy from JSON; `path` is where `j` sits in the enclosing document (for messages).
// The result has passed validate_policy. Throws ConfigError.
MatmulPolicy parse_matmul_policy(const nlohmann::json& j, const std::string& path = "");
// The same, on top of `base` (used for cascades of rules: later rules override earlier ones).
MatmulPolicy apply_matmul_policy(const nlohmann::json& j, const std::string& path, const MatmulPolicy& base);

// One operand quantizer from JSON (a quantizer preset name or a QUANT object). Throws ConfigError.
Quantizer parse_quantizer(const nlohmann::json& j, const std::string& path = "");
// The same, on top of `base` (its fields are kept where `j` does not set them).
Quantizer parse_quantizer(const nlohmann::json& j, const std::string& path, const Quantizer& base);

// A format from JSON (catalogue name or custom object). Throws ConfigError.
Format parse_format(const nlohmann::json& j, const std::string& path);

// Fully resolved JSON (every field), which parse_matmul_policy reads back to an equal policy.
nlohmann::json policy_to_json(const MatmulPolicy& p);
nlohmann::json quantizer_to_json(const Quantizer& q);
nlohmann::json accumulator_to_json(const Accumulator& acc);
// A catalogue name where the format is one, else the custom object.
nlohmann::json format_to_json(const Format& f);

// A command-line argument that holds JSON: "{...}" or "\"name\"" is parsed as JSON, "@file" reads
// the file, anything else is taken as a bare string (a preset name). Throws ConfigError (at `path`).
nlohmann::json parse_json_argument(const std::string& text, const std::string& path);

}  // namespace drift
