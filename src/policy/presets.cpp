// The preset table. Unless an entry says otherwise: products exact, inner and outer sums fp32 with
// rne and IEEE overflow in sequential order (MatmulPolicy's defaults), output fp32, operand
// rounding rne with saturation.
#include "policy/presets.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "arith/catalogue.h"
#include "policy/matmul_json.h"

namespace drift {
namespace {

// JSON fragments shared by several entries.
#define DRIFT_MX(fmt) R"({"format": ")" fmt R"(", "scaling": {"kind": "block", "block": 32, "rule": "floor"}})"
#define DRIFT_MX_EMU(fmt)                                                                              \
  R"({"format": ")" fmt R"(", "rounding": "rna", "overflow": "saturate", "scaling": {"kind": "block", "block": 32, )" \
  R"("rule": "floor", "emulate": {"exponent": "log2_fp32", "scale_bits": 16, "nearest_sum": "fp32"}}})"

const std::vector<MatmulPreset> kPresets = {
    {"fp32",
     "fp32 operands, exact products, fp32 sequential accumulation: each step acc = fp32(acc + a*b) is one "
     "fused multiply-add, i.e. a plain fp32 GEMM loop compiled with FMA (cuBLAS SGEMM without split-K).",
     R"({"a": {"format": "fp32", "overflow": "ieee"}, "b": {"format": "fp32", "overflow": "ieee"}})"},
    {"bf16",
     "bf16 operands (rne), exact products, fp32 accumulation and output: the usual mixed-precision GEMM "
     "(PyTorch autocast bf16 on tensor cores, modelled without the fused multi-term adder).",
     R"({"a": {"format": "bf16", "overflow": "ieee"}, "b": {"format": "bf16", "overflow": "ieee"}})"},
    {"fp16_acc",
     "fp16 operands, fp16 accumulation and output (rne): cuBLAS CUBLAS_COMPUTE_16F / HGEMM with a half "
     "accumulator. An accumulator example: long sums swamp.",
     R"({"a": {"format": "fp16", "overflow": "ieee"}, "b": {"format": "fp16", "overflow": "ieee"},
         "inner": {"format": "fp16"}, "outer": {"format": "fp16"}, "output": {"format": "fp16"}})"},
    {"bf16_acc",
     "bf16 operands, bf16 accumulation and output (rne): what a naive bf16 dot product does. An accumulator "
     "example: 8 significand bits make long sums swamp early.",
     R"({"a": {"format": "bf16", "overflow": "ieee"}, "b": {"format": "bf16", "overflow": "ieee"},
         "inner": {"format": "bf16"}, "outer": {"format": "bf16"}, "output": {"format": "bf16"}})"},
    {"fp8_tensor_e4m3",
     "OCP E4M3 for both operands with per-tensor current scaling (Transformer Engine Float8CurrentScaling): "
     "scale = fp32(448 / amax), elements fp8(fp32(x * scale)) saturating, dequantised once by 1/(sa*sb); "
     "fp32 accumulation.",
     R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "tensor"}},
         "b": {"format": "fp8_e4m3", "scaling": {"kind": "tensor"}}})"},
    {"fp8_delayed_hybrid",
     "Transformer Engine DelayedScaling with Format.HYBRID: the scale comes from an amax history (length 16 "
     "here, TE's default is 1024; algo max, margin 0) of earlier steps. HYBRID uses E4M3 in the forward pass "
     "and E5M2 for gradients: operand a is E4M3 (activation or weight), operand b is E5M2 (the gradient), "
     "as in wgrad = X^T * dY. For dgrad (dY * W^T) the gradient is a: override a and b. fp32 accumulation.",
     R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "delayed", "history": 16, "algo": "max"}},
         "b": {"format": "fp8_e5m2", "scaling": {"kind": "delayed", "history": 16, "algo": "max"}}})"},
    {"mxfp8_e4m3",
     "OCP Microscaling MXFP8 (E4M3) per OCP MX spec v1.0: blocks of 32 along K share an E8M0 scale "
     "2^(floor(log2 amax) - emax) (the floor rule; values above 448 after scaling saturate); each block's "
     "products are summed in fp32 and scaled into the fp32 outer sum.",
     "{\"a\": " DRIFT_MX("fp8_e4m3") ", \"b\": " DRIFT_MX("fp8_e4m3") "}"},
    {"mxfp8_e5m2",
     "OCP MXFP8 (E5M2), OCP MX spec v1.0: 32-element blocks along K, E8M0 scale by the floor rule, "
     "fp32 accumulation per block, scaled into the fp32 outer sum.",
     "{\"a\": " DRIFT_MX("fp8_e5m2") ", \"b\": " DRIFT_MX("fp8_e5m2") "}"},
    {"mxfp8_e4m3_microxcaling",
     "MXFP8 (E4M3) as microxcaling's Python MX quantizer computes it with the settings of the MX "
     "instability paper (scale_bits 16, rounding \"nearest\"): shared exponent floor(RN_fp32(log2 amax)) "
     "(one binade high just below a power of two; an all-zero block's log2 of 2^-126), scale exponents "
     "in [-32767, 32767] instead of E8M0's [-127, 127] with the scale a float32 (NaN block below 2^-149, "
     "dequantised values rounded to float32), elements rounded to nearest with ties away from zero "
     "(the sum |x| + 1/2 in float32), saturating. docs/policy.md, \"microxcaling emulation\". The quantizer "
     "rounds these operands element by element (no SIMD cast).",
     "{\"a\": " DRIFT_MX_EMU("fp8_e4m3") ", \"b\": " DRIFT_MX_EMU("fp8_e4m3") "}"},
    {"mxfp8_e5m2_microxcaling",
     "As mxfp8_e4m3_microxcaling with E5M2 elements (the paper's backward-pass format).",
     "{\"a\": " DRIFT_MX_EMU("fp8_e5m2") ", \"b\": " DRIFT_MX_EMU("fp8_e5m2") "}"},
    {"mxfp6",
     "OCP MXFP6, OCP MX spec v1.0, with the E2M3 element format for both operands (the spec also defines "
     "E3M2: more range, less precision; override a.format/b.format with fp6_e3m2). 32-element blocks, E8M0 "
     "scale by the floor rule, fp32 accumulation.",
     "{\"a\": " DRIFT_MX("fp6_e2m3") ", \"b\": " DRIFT_MX("fp6_e2m3") "}"},
    {"mxfp4",
     "OCP MXFP4 (E2M1), OCP MX spec v1.0: 32-element blocks along K, E8M0 scale by the floor rule, "
     "fp32 accumulation.",
     "{\"a\": " DRIFT_MX("fp4_e2m1") ", \"b\": " DRIFT_MX("fp4_e2m1") "}"},
    {"nvfp4",
     "NVIDIA NVFP4 (Blackwell): E2M1 elements in 16-element blocks along K, each with an E4M3 block scale, "
     "plus one fp32 per-tensor scale chosen so the largest block scale fits E4M3 (ScaleKind::nvfp4); "
     "rne elements (NVIDIA's training recipe uses stochastic rounding for gradients: set rounding sr), "
     "fp32 accumulation.",
     R"({"a": {"format": "fp4_e2m1", "scaling": {"kind": "nvfp4", "block": 16}},
         "b": {"format": "fp4_e2m1", "scaling": {"kind": "nvfp4", "block": 16}}})"},
    {"deepseek_fp8",
     "DeepSeek-V3 FP8 training (arXiv 2412.19437, sec. 3.3): E4M3 everywhere; a (activations) scaled per "
     "1x128 tile, b (weights) per 128x128 block (two_d), scale fp32(amax/448) with amax at least 1e-4; "
     "partial sums promoted to fp32 every 128 products (= the scale block). The tensor cores' limited "
     "accumulation width inside each 128 is modelled only when inner.fused is set.",
     R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "tile", "block": 128, "amax_floor": 1e-4}},
         "b": {"format": "fp8_e4m3", "scaling": {"kind": "tile", "block": 128, "two_d": true, "amax_floor": 1e-4}},
         "inner": {"promote_every": 128}})"},
    {"deepseek_fp8_h100",
     "deepseek_fp8 with the H100 FP8 tensor-core accumulation inside each 128-product block: the fused "
     "multi-term model h100_fp8_e4m3 (arith/tc_presets.h: 32-term groups aligned to the largest exponent, "
     "13 fraction bits kept, truncated) from zero per block, then scaled and promoted into the fp32 outer "
     "sum: the limited accumulation precision DeepSeek-V3 sec. 3.3.2 measured (~14 bits) and promoted around.",
     R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "tile", "block": 128, "amax_floor": 1e-4}},
         "b": {"format": "fp8_e4m3", "scaling": {"kind": "tile", "block": 128, "two_d": true, "amax_floor": 1e-4}},
         "inner": {"promote_every": 128, "fused": "h100_fp8_e4m3"}})"},
    // Blackwell block-scaled MMA (tcgen05.mma kind::mxf8f6f4 / mxf4nvf4): the scales enter inside the
    // instruction, and how is not published. Each entry below encodes one hypothesis; none is validated
    // against a GPU (scripts/gpu_check.sh holds the measurement that decides; the H200 lacks these
    // instructions).
    {"b200_mxfp8_e4m3_blocksum",
     "UNVALIDATED hypothesis for Blackwell MXFP8 (E4M3) MMA: each 32-element block's products are fused as "
     "B200's unscaled FP8 MMA is measured to do (b200_fp8_e4m3: one group, 25 bits kept, truncated, the sum "
     "truncated to fp32), that partial sum is multiplied by the two E8M0 block scales (exact) and only then "
     "joins the fp32 accumulator, with one IEEE addition rounded to nearest even. Operands: mxfp8_e4m3.",
     "{\"a\": " DRIFT_MX("fp8_e4m3") ", \"b\": " DRIFT_MX("fp8_e4m3") ", \"inner\": {\"fused\": \"b200_fp8_e4m3\"}}"},
    {"b200_mxfp8_e5m2_blocksum",
     "UNVALIDATED hypothesis, as b200_mxfp8_e4m3_blocksum with E5M2 elements (fused model b200_fp8_e5m2).",
     "{\"a\": " DRIFT_MX("fp8_e5m2") ", \"b\": " DRIFT_MX("fp8_e5m2") ", \"inner\": {\"fused\": \"b200_fp8_e5m2\"}}"},
    {"b200_nvfp4_blocksum",
     "UNVALIDATED hypothesis for Blackwell NVFP4 MMA: each 16-element block's products fused with the B200 FP8 "
     "parameters (25 bits kept, truncated, the sum truncated to fp32; E2M1 inputs), the partial sum multiplied "
     "by the product of the two E4M3 block scales (fp32) and added to the fp32 accumulator with one IEEE "
     "addition rounded to nearest even; the fp32 tensor scales applied at the end. A block of 16 E2M1 products "
     "sums exactly, so under this hypothesis the hardware equals the plain nvfp4 model bit for bit; the "
     "alternative (scales folded into each product's alignment exponent across a 64-product instruction) is "
     "b200_nvfp4_folded.",
     R"({"a": {"format": "fp4_e2m1", "scaling": {"kind": "nvfp4", "block": 16}},
         "b": {"format": "fp4_e2m1", "scaling": {"kind": "nvfp4", "block": 16}},
         "inner": {"fused": {"preset": "b200_fp8_e4m3", "terms": 16, "promote_every": 16, "in_emin": 0}}})"},
    // The other hypothesis: the block scales are folded into the products the fused groups align
    // (inner.scales "products": every element times its block's scale, exactly), so a group spanning
    // blocks of different scales aligns and truncates them together. A subnormal element then counts at
    // its own leading bit (in_emin -1022: no clamp on the scaled values).
    {"b200_mxfp8_e4m3_folded",
     "UNVALIDATED hypothesis for Blackwell MXFP8 (E4M3) MMA: the E8M0 block scales folded into the products' "
     "alignment exponents, and each 32-product group aligned together with the running fp32 sum and truncated "
     "(25 bits kept, result truncated to fp32): B200TC.m's published handling of c, with scaled products. "
     "Backend cpu. Operands: mxfp8_e4m3.",
     "{\"a\": " DRIFT_MX("fp8_e4m3") ", \"b\": " DRIFT_MX("fp8_e4m3") ", \"inner\": {\"scales\": \"products\", "
     "\"fused\": {\"preset\": \"b200_fp8_e4m3\", \"promote_every\": 0, \"in_emin\": -1022}}}"},
    {"b200_mxfp8_e5m2_folded",
     "UNVALIDATED hypothesis, as b200_mxfp8_e4m3_folded with E5M2 elements (fused model b200_fp8_e5m2).",
     "{\"a\": " DRIFT_MX("fp8_e5m2") ", \"b\": " DRIFT_MX("fp8_e5m2") ", \"inner\": {\"scales\": \"products\", "
     "\"fused\": {\"preset\": \"b200_fp8_e5m2\", \"promote_every\": 0, \"in_emin\": -1022}}}"},
    {"b200_nvfp4_folded",
     "UNVALIDATED hypothesis for Blackwell NVFP4 MMA (kind::mxf4nvf4, K = 64 per instruction): each element "
     "multiplied by its E4M3 block scale inside the instruction, the 64 scaled products (four 16-element blocks) "
     "aligned to the largest as one group, 25 bits kept, truncated, the sum truncated to fp32 and added to the "
     "fp32 accumulator with one rounding to nearest (as B200's FP8 MMA adds c); a block whose scale is far below "
     "another's in the same instruction loses its low bits, unlike b200_nvfp4_blocksum. Backend cpu.",
     R"({"a": {"format": "fp4_e2m1", "scaling": {"kind": "nvfp4", "block": 16}},
         "b": {"format": "fp4_e2m1", "scaling": {"kind": "nvfp4", "block": 16}},
         "inner": {"scales": "products",
                   "fused": {"preset": "b200_fp8_e4m3", "terms": 64, "promote_every": 64, "in_emin": -1022}}})"},
};

#undef DRIFT_MX

MatmulPolicy build(const MatmulPreset& p) {
  try {
    return parse_matmul_policy(nlohmann::json::parse(p.json), std::string("preset ") + p.name);
  } catch (const std::exception& e) {  // a broken table entry is a bug in drift, not user input
    throw std::logic_error(std::string("drift: matmul preset '") + p.name + "' is invalid: " + e.what());
  }
}

}  // namespace

const std::vector<MatmulPreset>& matmul_presets() { return kPresets; }

std::optional<MatmulPolicy> find_matmul_preset(std::string_view name) {
  for (const auto& p : kPresets)
    if (name == p.name) return build(p);
  return std::nullopt;
}

std::string matmul_preset_list() {
  std::string s;
  for (const auto& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::optional<Quantizer> find_quantizer_preset(std::string_view name) {
  for (const auto& p : kPresets) {
    const std::string n = p.name;
    if (name == n || name == n + ".a") return build(p).a;
    if (name == n + ".b") return build(p).b;
  }
  if (auto f = find_format(name)) {
    Quantizer q;  // plain cast: rne, saturate, no scaling
    q.format = *f;
    return q;
  }
  return std::nullopt;
}

std::string quantizer_preset_list() {
  std::string s;
  for (const auto& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name) + "[.a|.b]";
  return s;
}

}  // namespace drift
