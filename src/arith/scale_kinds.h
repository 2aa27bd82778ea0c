// The scaling kinds of a quantizer as one table: what each kind is (its name, default block,
// whether it keeps per-block scales, whether it needs the tensor's amax first, whether it has two
// levels of scales, what the CUDA native path takes) is a row here, and every caller asks the row
// instead of listing kinds. What a kind computes is one of a few scale rules (TensorScaleRule,
// BlockScaleRule): the rules are the only code that differs between kinds, each dispatched in one
// place (tensor_level_multiplier in arith/quantize.cpp, block_scale_of in arith/quantize_element.h).
// A new kind that combines existing rules is its enum value and its row; a new rule is also its
// case in one of those two functions (README, "Layout").
//
// Host and device code include this file (quantize_element.h): plain enums and a constexpr table,
// no allocation. Names for parsing and printing are in scale_kinds.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace drift {

// In the table's row order.
enum class ScaleKind : uint8_t { none, tensor, delayed, block, tile, nvfp4 };

// The tensor-level scale: one multiplier for every element of the operand (or, under a two-level
// kind, the multiplier the block scales are computed under).
enum class TensorScaleRule : uint8_t {
  none,               // no tensor scale
  current_amax,       // TE current scaling: fp32(max / amax) / 2^margin from this tensor's amax
  amax_history,       // TE delayed scaling: from the amax of earlier steps (DelayedState)
  block_scale_range,  // NVFP4's encode scale fp32(e4m3 max * element max / amax): the largest
                      // block scale fits the block scales' format
};

// The block-level scale: one per block of `block` elements along k (or block x block when 2-D).
enum class BlockScaleRule : uint8_t {
  none,               // no block scales
  e8m0_exponent,      // OCP MX: a power of two from the block's amax by the ExpRule (scaling.rule)
  fp32_ratio,         // DeepSeek-V3 tiles: fp32(amax / max), or its power of two (scaling.pow2)
  e4m3_under_tensor,  // NVFP4: fp8_e4m3(fp32(amax / max) * s_enc), under the tensor's encode scale
};

struct ScaleKindTraits {
  ScaleKind kind;
  const char* name;              // the JSON name (scaling.kind)
  TensorScaleRule tensor_rule;
  BlockScaleRule block_rule;
  int default_block;             // scaling.block when the kind is chosen (unblocked kinds: Scaling's
                                 // default, unused)
  bool needs_float_elements;     // the block rule reads the element format's exponent range
  int fold_element_bits;         // inner.scales "products": a block scale folds into an element
                                 // exactly and narrowly up to this many significand bits (0: never;
                                 // 64: any element, the scale being a power of two)
  bool block_in_format;          // the block size is part of the format (MX 32, NVFP4 16): drift
                                 // matmul warns when K is shorter than a block
  bool native_fp8;               // cuBLASLt's FP8 GEMM (backend cuda-native) takes it: one scale per
                                 // tensor, known before the GEMM
  const char* scale_format;      // what a scale is stored as (describe_operand_rounding)
  bool pow2_option;              // scaling.pow2 applies (the scale truncated / rounded to a power of two)

  constexpr bool blocked() const { return block_rule != BlockScaleRule::none; }
  constexpr bool scaled() const { return blocked() || tensor_rule != TensorScaleRule::none; }
  // The tensor's amax is needed before any element is quantized: a counting pass of its own.
  constexpr bool needs_tensor_amax() const {
    return tensor_rule == TensorScaleRule::current_amax || tensor_rule == TensorScaleRule::block_scale_range;
  }
  // Block scales nested under a tensor scale (the block scales are computed with it).
  constexpr bool two_level() const { return blocked() && tensor_rule != TensorScaleRule::none; }
  // Carries state across steps (DelayedState: the amax history).
  constexpr bool keeps_history() const { return tensor_rule == TensorScaleRule::amax_history; }
};

// clang-format off
inline constexpr ScaleKindTraits kScaleKinds[] = {
  // kind               name       tensor rule                         block rule                          block float  fold  in-fmt native  scale       pow2
  {ScaleKind::none,    "none",    TensorScaleRule::none,              BlockScaleRule::none,              32, false,  0,   false, true,  "",         false},
  {ScaleKind::tensor,  "tensor",  TensorScaleRule::current_amax,      BlockScaleRule::none,              32, false,  0,   false, true,  "fp32",     true},
  {ScaleKind::delayed, "delayed", TensorScaleRule::amax_history,      BlockScaleRule::none,              32, false,  0,   false, true,  "fp32",     true},
  {ScaleKind::block,   "block",   TensorScaleRule::none,              BlockScaleRule::e8m0_exponent,     32, true,  64,   true,  false, "e8m0",     false},
  {ScaleKind::tile,    "tile",    TensorScaleRule::none,              BlockScaleRule::fp32_ratio,       128, false,  0,   false, false, "fp32",     true},
  {ScaleKind::nvfp4,   "nvfp4",   TensorScaleRule::block_scale_range, BlockScaleRule::e4m3_under_tensor, 16, true,  20,   true,  false, "fp8_e4m3", false},
};
// clang-format on
inline constexpr size_t kScaleKindCount = sizeof(kScaleKinds) / sizeof(kScaleKinds[0]);

constexpr bool scale_kinds_in_enum_order() {
  for (size_t i = 0; i < kScaleKindCount; ++i)
    if (static_cast<size_t>(kScaleKinds[i].kind) != i) return false;
  return true;
}
static_assert(scale_kinds_in_enum_order(), "kScaleKinds: one row per ScaleKind, in the enum's order");

constexpr const ScaleKindTraits& scale_kind_traits(ScaleKind k) { return kScaleKinds[static_cast<size_t>(k)]; }

// Names for parsing and printing (scale_kinds.cpp).
const char* to_string(ScaleKind k);
bool parse_scale_kind(const std::string& s, ScaleKind* out);
// Every kind's name in table order, separated by '|' (the choices an error message lists).
const char* scale_kind_choices();

}  // namespace drift
