#include "arith/tc_presets.h"

#include <sstream>

#include "arith/catalogue.h"

namespace drift {
namespace {

constexpr const char* kRepo = "north-numerical-computing/MATLAB-tensor-core";

// One row of the table: the published parameters. Everything else is derived in build().
struct Row {
  const char* name;
  const char* aliases;
  const char* gpu;
  const char* input;   // catalogue format
  const char* output;  // catalogue format
  int terms;           // def_params.fma
  int neab;            // def_params.neab
  Rounding rounding;   // def_params.frmode
  int min_align_exp;   // def_params.min_exp_limit (kNoMinAlignExp where the model has none)
  int promote_every;   // 0, or 128 for the DeepSeek-V3 FP8 recipe
  const char* model_file;
  const char* note;
  const char* validated;
  // Hopper's emulated FP8 mma.sync only (FusedModel::interleave): the run length in which each block's
  // products are dealt to its two groups, and the format the inputs are unpacked to (whose emin then
  // counts, not the FP8 one's). 0 and nullptr elsewhere.
  int interleave = 0;
  const char* unpacked = nullptr;
};

constexpr Rounding rtz = Rounding::rtz;
constexpr Rounding rne = Rounding::rne;
constexpr int none = kNoMinAlignExp;

// Sources: models/<GPU>TC.m of the repository above (BSD-2-Clause), which set fma, neab, frmode and
// min_exp_limit per input/output format, and Khattak & Mikaitis, "Accurate models of NVIDIA tensor
// cores", arXiv:2512.07004 (2025). Group sizes and the Hopper FP8 13-bit result also in Fasi,
// Higham, Mikaitis & Pranesh, PeerJ CS 2021 (V100) and the DeepSeek-V3 report (2024, FP8 ~14 bits).
const Row kRows[] = {
    // Volta: 4-term groups, no extra alignment bit.
    {"v100_fp16", "v100", "V100", "fp16", "fp32", 4, 0, rtz, none, 0, "V100TC.m", "", "V100/fp16 d_V100_fp32"},
    {"v100_fp16_out16", "", "V100", "fp16", "fp16", 4, 0, rne, none, 0, "V100TC.m",
     "fp16 output: rounded to nearest", "V100/fp16 d_V100_fp16"},
    // Ampere: 8-term groups (4 for tf32), one extra alignment bit.
    {"a100_fp16", "a100", "A100", "fp16", "fp32", 8, 1, rtz, none, 0, "A100TC.m", "", "A100/fp16 d_A100_fp32"},
    {"a100_fp16_out16", "", "A100", "fp16", "fp16", 8, 1, rne, none, 0, "A100TC.m",
     "fp16 output: rounded to nearest", "A100/fp16 d_A100_fp16"},
    {"a100_bf16", "", "A100", "bf16", "fp32", 8, 1, rtz, none, 0, "A100TC.m", "", "A100/bf16 d_A100_fp32"},
    {"a100_tf32", "", "A100", "tf32", "fp32", 4, 1, rtz, none, 0, "A100TC.m", "", "A100/tf32 d_A100_fp32"},
    // Hopper: 16-term groups (8 for tf32), two extra alignment bits; FP8 in 32-term groups with only
    // 13 fraction bits kept and written (neab = -10).
    {"h100_fp16", "h100", "H100", "fp16", "fp32", 16, 2, rtz, -133, 0, "H100TC.m", "", "H100/fp16 d_H100_fp32"},
    {"h100_fp16_out16", "", "H100", "fp16", "fp16", 16, 2, rne, -133, 0, "H100TC.m",
     "fp16 output: rounded to nearest", "H100/fp16 d_H100_fp16"},
    {"h100_bf16", "", "H100", "bf16", "fp32", 16, 2, rtz, -133, 0, "H100TC.m", "", "H100/bf16 d_H100_fp32"},
    {"h100_tf32", "", "H100", "tf32", "fp32", 8, 2, rtz, -133, 0, "H100TC.m",
     "the shipped vectors have K = 4, within one group", "H100/tf32 d_H100_fp32"},
    {"h100_fp8_e4m3", "h100_fp8 h100_e4m3", "H100", "fp8_e4m3", "fp32", 32, -10, rtz, -133, 0, "H100TC.m",
     "WGMMA FP8: 13 fraction bits kept below the largest exponent and 13 written (fp32 with the low 10 "
     "bits zero), truncated",
     "H100/E4M3 d_H100_fp32 (measured with c = 0)"},
    {"h100_fp8_e5m2", "h100_e5m2", "H100", "fp8_e5m2", "fp32", 32, -10, rtz, -133, 0, "H100TC.m",
     "as h100_fp8_e4m3", "H100/E5M2 d_H100_fp32 (measured with c = 0)"},
    // FP8 with fp16 output is mma.sync m16n8k32 .f16.e4m3.e4m3.f16 (model_validation/CUDA/
    // mma_fp8_output_fp16.cu), an sm_89 instruction that sm_90 emulates on the fp16 tensor core
    // (NVIDIA/cutlass issue #1986): the FP8 inputs unpacked to fp16 (exact), then two fp16 HMMA k16
    // (the h100_fp16_out16 parameters: 16 terms, neab 2, rne), chained from zero, the first over the
    // low f16x2 half of each packed register (index mod 4 in {0, 1}), the second over the high half,
    // and c added last with one fp16 add (rne). The order and the late c are fixed by the measured
    // vectors (c in the first group: ~61%, high half first: 3476 / 3755 of 5000); the published
    // H100TC.m FP8 parameters (one 32-term group, neab -10, c aligned with the products) give 3113 /
    // 3340. The kept bits (21..26 all match) and the unpacked emin are not constrained by the vectors.
    {"h100_fp8_e4m3_out16", "h100_fp8_out16", "H100", "fp8_e4m3", "fp16", 16, 2, rne, -133, 32,
     "H100TC.m (its fp16-input, fp16-output parameters)",
     "mma.sync FP8 with fp16 accumulator, emulated by sm_90 on the fp16 tensor core (NVIDIA/cutlass "
     "issue #1986); c added after the products",
     "H100/E4M3 d_H100_fp16", 2, "fp16"},
    {"h100_fp8_e5m2_out16", "", "H100", "fp8_e5m2", "fp16", 16, 2, rne, -133, 32,
     "H100TC.m (its fp16-input, fp16-output parameters)", "as h100_fp8_e4m3_out16", "H100/E5M2 d_H100_fp16", 2,
     "fp16"},
    {"h100_fp8_promote128", "h100_fp8_e4m3_promote128", "H100", "fp8_e4m3", "fp32", 32, -10, rtz, -133, 128,
     "H100TC.m",
     "DeepSeek-V3 recipe: h100_fp8_e4m3 chained over 128 products (4 WGMMA groups), each 128-block's "
     "result added to an IEEE fp32 accumulator (rne) that starts at c",
     ""},
    {"h100_fp8_e5m2_promote128", "", "H100", "fp8_e5m2", "fp32", 32, -10, rtz, -133, 128, "H100TC.m",
     "as h100_fp8_promote128 with E5M2 inputs", ""},
    // Blackwell B200: 16-term groups (8 for tf32, 32 for FP8), two extra alignment bits; fp16 output
    // rounded to nearest with minimum alignment exponent -21 (B200TC.m; -15 before). Every B200 preset
    // is fixed by the measured vectors in data/tensorcore/B200 (reference repository state b12b5a7).
    {"b200_fp16", "b200", "B200", "fp16", "fp32", 16, 2, rtz, -133, 0, "B200TC.m", "", "B200/fp16 d_B200_fp32"},
    {"b200_fp16_out16", "", "B200", "fp16", "fp16", 16, 2, rne, -21, 0, "B200TC.m", "", "B200/fp16 d_B200_fp16"},
    {"b200_bf16", "", "B200", "bf16", "fp32", 16, 2, rtz, -133, 0, "B200TC.m", "", "B200/bf16 d_B200_fp32"},
    {"b200_tf32", "", "B200", "tf32", "fp32", 8, 2, rtz, -133, 0, "B200TC.m",
     "the shipped vectors have K = 4, within one group", "B200/tf32 d_B200_fp32"},
    // FP8 with fp32 output, derived from the measured vectors (scripts/tc_model_search.py): the 32
    // products are fused as B200TC.m says (one group, 25 bits kept, truncated, the sum truncated to
    // fp32), but c takes no part in that group: the group's fp32 result is added to c with one IEEE
    // fp32 addition rounded to nearest even (promote_every = 32). B200TC.m aligns c with the products
    // and truncates once: 3207 (E4M3) of 5000. Of the candidates searched, every one that reproduces both
    // files keeps c out of the group; E5M2 (wide exponents) needs at least 23 kept bits and the group
    // truncated before the addition (one rounding of products + c: 4999).
    {"b200_fp8_e4m3", "b200_fp8", "B200", "fp8_e4m3", "fp32", 32, 2, rtz, -133, 32, "B200TC.m",
     "c is not aligned with the products: the group's result (truncated to fp32) is added to c with one IEEE "
     "fp32 addition, rounded to nearest even (B200TC.m aligns c with the products: 3207 of 5000 E4M3 cases)",
     "B200/E4M3 d_B200_fp32"},
    {"b200_fp8_e5m2", "", "B200", "fp8_e5m2", "fp32", 32, 2, rtz, -133, 32, "B200TC.m", "as b200_fp8_e4m3",
     "B200/E5M2 d_B200_fp32"},
    // FP8 with fp16 output (mma.sync .f16 accumulator) behaves as Hopper's emulation on the fp16 tensor
    // core (h100_fp8_e4m3_out16) with the B200 fp16 parameters: both measured files 5000/5000.
    {"b200_fp8_e4m3_out16", "b200_fp8_out16", "B200", "fp8_e4m3", "fp16", 16, 2, rne, -21, 32,
     "B200TC.m (its fp16-input, fp16-output parameters)",
     "mma.sync FP8 with fp16 accumulator: as Hopper's emulation on the fp16 tensor core (h100_fp8_e4m3_out16); "
     "c added after the products",
     "B200/E4M3 d_B200_fp16", 2, "fp16"},
    {"b200_fp8_e5m2_out16", "", "B200", "fp8_e5m2", "fp16", 16, 2, rne, -21, 32,
     "B200TC.m (its fp16-input, fp16-output parameters)", "as b200_fp8_e4m3_out16", "B200/E5M2 d_B200_fp16", 2,
     "fp16"},
    // Ada Lovelace L40S (L40STC.m, commit 12ed0c5): 8-term groups (4 for tf32), one extra bit; FP8 in
    // 16-term groups with 13 fraction bits (neab = -10); minimum alignment exponent -132 for fp32 output
    // and -20 for fp16 output, which L40STC.m models since that commit (it rejected fp16 output for fp16
    // input before). The RTX Ada presets (AdaTC.m) are these without the minimum (kSameAs below).
    {"l40s_fp16", "l40s", "L40S", "fp16", "fp32", 8, 1, rtz, -132, 0, "L40STC.m", "", ""},
    {"l40s_fp16_out16", "", "L40S", "fp16", "fp16", 8, 1, rne, -20, 0, "L40STC.m",
     "fp16 output rounded to nearest (L40STC.m since commit 12ed0c5)", ""},
    {"l40s_bf16", "", "L40S", "bf16", "fp32", 8, 1, rtz, -132, 0, "L40STC.m", "", ""},
    {"l40s_tf32", "", "L40S", "tf32", "fp32", 4, 1, rtz, -132, 0, "L40STC.m", "", ""},
    {"l40s_fp8_e4m3", "l40s_fp8", "L40S", "fp8_e4m3", "fp32", 16, -10, rtz, -132, 0, "L40STC.m",
     "13 fraction bits kept and written, truncated", ""},
    {"l40s_fp8_e5m2", "", "L40S", "fp8_e5m2", "fp32", 16, -10, rtz, -132, 0, "L40STC.m", "as l40s_fp8_e4m3", ""},
    {"l40s_fp8_e4m3_out16", "", "L40S", "fp8_e4m3", "fp16", 16, -10, rne, -20, 0, "L40STC.m",
     "fp16 output rounded to nearest, confirmed by L40S measurements (drift issue 20)", ""},
    {"l40s_fp8_e5m2_out16", "", "L40S", "fp8_e5m2", "fp16", 16, -10, rne, -20, 0, "L40STC.m",
     "as l40s_fp8_e4m3_out16", ""},
};

Format catalogue_format(const char* name) {
  auto f = find_format(name);
  return f ? *f : Format{};  // every name in the table is a catalogue name (tested)
}

TcPreset build(const Row& r) {
  TcPreset p;
  p.name = r.name;
  p.aliases = r.aliases;
  p.gpu = r.gpu;
  p.input = r.input;
  p.output = r.output;
  p.in_format = catalogue_format(r.input);
  p.out_format = catalogue_format(r.output);
  p.neab = r.neab;
  FusedModel& m = p.model;
  m.terms = r.terms;
  // The published models keep 23 + neab fraction bits below the unnormalised largest exponent (the
  // fp32 significand width plus the extra alignment bits), for every output format.
  m.kept_bits = 23 + r.neab;
  m.align_includes_acc = true;
  m.sticky = false;     // stkbitenabled = 0 in every NVIDIA model
  m.carry_bits = 0;     // no carry limit in any published model
  m.final_rounding = r.rounding;
  // A negative neab narrows the written result too (GEMM.m: NoManBitsOut + neab), never beyond the
  // output format's own precision.
  m.out_man_bits = p.out_format.man_bits;
  if (r.neab < 0 && 23 + r.neab < m.out_man_bits) m.out_man_bits = 23 + r.neab;
  m.out = p.out_format;
  m.in_emin = r.unpacked ? catalogue_format(r.unpacked).emin : p.in_format.emin;
  m.interleave = r.interleave;
  m.in_subnormals = true;   // in_subnormals = 1
  m.out_subnormals = true;  // out_subnormals = 1
  m.min_align_exp = r.min_align_exp;
  m.promote_every = r.promote_every;
  p.source = std::string(kRepo) + " models/" + r.model_file + "; arXiv:2512.07004";
  std::ostringstream doc;
  doc << r.gpu << " tensor core, " << r.input << " inputs, " << r.output << " output: groups of " << r.terms
      << " products, aligned to the largest product/c exponent, " << m.kept_bits << " fraction bits kept (neab "
      << r.neab << "), truncated, no sticky bit, normalised once, result " << m.out_man_bits << " fraction bits "
      << (r.rounding == Rounding::rtz ? "truncated (rtz)" : "rounded to nearest even");
  if (r.min_align_exp != kNoMinAlignExp) doc << ", alignment exponent at least " << r.min_align_exp;
  doc << "; subnormal inputs and outputs kept";
  if (r.unpacked) doc << "; inputs unpacked to " << r.unpacked << " (exact) for the tensor core";
  if (r.interleave)
    doc << "; each " << 2 * r.terms << " products are two chained groups started from zero, the products dealt to "
        << "them in alternate runs of " << r.interleave << " (the first run to the first group)";
  if (r.promote_every) doc << "; promoted to IEEE " << r.output << " every " << r.promote_every << " products";
  if (r.note[0]) doc << ". " << r.note;
  p.doc = doc.str();
  p.validated = r.validated;
  return p;
}

// GPUs whose tensor cores are another's: every preset of `same_as` is repeated under `gpu`, its names
// and aliases with the prefix changed, its note prefixed with `why`.
struct SameTensorCores {
  const char* gpu;
  const char* prefix;
  const char* same_as;
  const char* same_prefix;
  const char* model_file;
  const char* why;
  bool no_min_align = false;  // the copies have no minimum alignment exponent
  bool own_notes_only = false;  // the copies drop the notes of the rows they copy (their provenance)
};

const SameTensorCores kSameAs[] = {
    {"H200", "h200", "H100", "h100", "H200TC.m -> H100TC.m",
     "H200 is Hopper (sm_90, the H100's tensor cores): the H100 model, as the reference repository's H200TC.m "
     "since commit abc3e16 (2025-12-19; before, it called B200TC); measured H200 FP8 results (c = 0) agree with "
     "the H100 FP8 model and contradict the B200 one. No H200 vectors ship with drift"},
    {"Ada", "ada", "L40S", "l40s", "AdaTC.m",
     "RTX Ada (AdaTC.m): the L40S parameters without a minimum alignment exponent", true, true},
};

// `words` with every word's leading `from` replaced by `to`.
std::string renamed(const std::string& words, const std::string& from, const std::string& to) {
  std::istringstream in(words);
  std::string w, out;
  while (in >> w) {
    if (w.compare(0, from.size(), from) == 0) w = to + w.substr(from.size());
    out += (out.empty() ? "" : " ") + w;
  }
  return out;
}

// The presets of s.gpu: those of s.same_as renamed.
void append_same_as(const SameTensorCores& s, std::vector<TcPreset>* out) {
  for (const Row& r : kRows) {
    if (std::string(r.gpu) != s.same_as) continue;
    Row copy = r;
    const std::string name = renamed(r.name, s.same_prefix, s.prefix);
    const std::string aliases = renamed(r.aliases, s.same_prefix, s.prefix);
    const bool notes = r.note[0] && !s.own_notes_only;
    const std::string note = std::string(s.why) + (notes ? ". " + renamed(r.note, s.same_prefix, s.prefix) : "");
    copy.name = name.c_str();
    copy.aliases = aliases.c_str();
    copy.gpu = s.gpu;
    copy.model_file = s.model_file;
    copy.note = note.c_str();
    copy.validated = "";
    if (s.no_min_align) copy.min_align_exp = none;
    out->push_back(build(copy));
  }
}

std::vector<TcPreset> build_all() {
  std::vector<TcPreset> out;
  const size_t n = sizeof kRows / sizeof kRows[0];
  for (size_t i = 0; i < n; ++i) {
    out.push_back(build(kRows[i]));
    const bool last_of_gpu = i + 1 == n || std::string(kRows[i + 1].gpu) != kRows[i].gpu;
    if (!last_of_gpu) continue;
    for (const SameTensorCores& s : kSameAs)
      if (std::string(kRows[i].gpu) == s.same_as) append_same_as(s, &out);
  }
  return out;
}

// The promotion of a software recipe around the instruction (DeepSeek-V3's 128 products), 0 where
// the promotion is the instruction's own (the emulated FP8 mma.sync adds its 32 products to c) or none.
int recipe_promotion(const FusedModel& m) {
  const int instruction = m.interleave > 0 ? 2 * m.terms : m.terms;
  return m.promote_every > instruction ? m.promote_every : 0;
}

}  // namespace

const std::vector<TcPreset>& tc_presets() {
  static const std::vector<TcPreset> presets = build_all();
  return presets;
}

std::optional<TcPreset> find_tc_preset(std::string_view name) {
  for (const auto& p : tc_presets())
    if (p.name == name || has_word(p.aliases, name)) return p;
  return std::nullopt;
}

std::optional<TcPreset> tc_preset_with_output(const TcPreset& p, std::string_view output) {
  if (p.output == output) return p;
  for (const auto& q : tc_presets())
    if (q.gpu == p.gpu && q.input == p.input && q.output == output &&
        recipe_promotion(q.model) == recipe_promotion(p.model))
      return q;
  return std::nullopt;
}

}  // namespace drift
