// Tensor-core accumulation models (arith/fused_accum.h, arith/tc_presets.h) against results measured
// on real V100, A100, H100 and B200 GPUs (data/tensorcore, Khattak & Mikaitis), and against small cases
// whose expected values are derived by hand below.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "arith/catalogue.h"
#include "arith/fused_accum.h"
#include "arith/tc_presets.h"
#include "arith/tcverify.h"
#include "io/tc_vectors.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_tensorcore {

using namespace drift;

namespace {

// A set's files replayed through a preset: read (io/tc_vectors.h), then replayed (arith/tcverify.h).
TcFileResult verify_dir(const std::string& dir, const TcPreset& p, const TcVerifyOptions& opt) {
  return tc_verify(io::read_tc_vectors(dir, p.output, !opt.c_zero), p, opt);
}

TcPreset preset(const char* name) {
  auto p = find_tc_preset(name);
  REQUIRE_MESSAGE(p.has_value(), name);
  return *p;
}

double dot(const char* name, double c, std::initializer_list<double> a, std::initializer_list<double> b) {
  const TcPreset p = preset(name);
  REQUIRE(a.size() == b.size());
  return fused_dot(c, a.begin(), b.begin(), static_cast<int>(a.size()), p.model);
}

double p2(int e) { return pow2(e); }

}  // namespace

TEST_CASE("tensorcore: every measured file reproduced by its preset") {
  struct Expect {
    const char* dir;      // under data/tensorcore
    const char* output;   // fp32 | fp16
    const char* preset;
    bool c_zero;          // the H100 FP8 fp32 vectors were measured with WGMMA and c = 0
    size_t matched;       // of 5000
  };
  // H100 FP8 inputs with fp16 output (mma.sync m16n8k32 with an fp16 accumulator) is a software
  // emulation on sm_90 (two fp16 HMMA over the low and high f16x2 halves of the unpacked registers,
  // then c added in fp16; see h100_fp8_e4m3_out16 in arith/tc_presets.cpp). The published H100TC.m
  // parameters for this path (one 32-term group, neab -10, c aligned with the products) reproduce
  // only 3113 (E4M3) and 3340 (E5M2) of these 5000.
  const Expect table[] = {
      {"V100/fp16", "fp32", "v100_fp16", false, 5000},
      {"V100/fp16", "fp16", "v100_fp16_out16", false, 5000},
      {"A100/fp16", "fp32", "a100_fp16", false, 5000},
      {"A100/fp16", "fp16", "a100_fp16_out16", false, 5000},
      {"A100/bf16", "fp32", "a100_bf16", false, 5000},
      {"A100/tf32", "fp32", "a100_tf32", false, 5000},
      {"H100/fp16", "fp32", "h100_fp16", false, 5000},
      {"H100/fp16", "fp16", "h100_fp16_out16", false, 5000},
      {"H100/bf16", "fp32", "h100_bf16", false, 5000},
      {"H100/tf32", "fp32", "h100_tf32", false, 5000},
      {"H100/E4M3", "fp32", "h100_fp8_e4m3", true, 5000},
      {"H100/E5M2", "fp32", "h100_fp8_e5m2", true, 5000},
      {"H100/E4M3", "fp16", "h100_fp8_e4m3_out16", false, 5000},
      {"H100/E5M2", "fp16", "h100_fp8_e5m2_out16", false, 5000},
      {"B200/fp16", "fp32", "b200_fp16", false, 5000},
      {"B200/fp16", "fp16", "b200_fp16_out16", false, 5000},
      {"B200/bf16", "fp32", "b200_bf16", false, 5000},
      {"B200/tf32", "fp32", "b200_tf32", false, 5000},
      {"B200/E4M3", "fp32", "b200_fp8_e4m3", false, 5000},
      {"B200/E5M2", "fp32", "b200_fp8_e5m2", false, 5000},
      {"B200/E4M3", "fp16", "b200_fp8_e4m3_out16", false, 5000},
      {"B200/E5M2", "fp16", "b200_fp8_e5m2_out16", false, 5000},
  };
  const std::string root = std::string(DRIFT_SOURCE_DIR) + "/data/tensorcore";
  std::set<std::string> covered;
  for (const auto& e : table) {
    const std::string dir = root + "/" + e.dir;
    const std::string label = std::string(e.dir) + " " + e.output + " " + e.preset;
    CAPTURE(label);
    const TcPreset p = preset(e.preset);
    REQUIRE(p.output == e.output);
    TcVerifyOptions opt;
    opt.c_zero = e.c_zero;
    const TcFileResult r = verify_dir(dir, p, opt);
    MESSAGE(label << ": " << r.matched << "/" << r.total);
    CHECK(r.total == 5000);
    CHECK(r.matched == e.matched);
    covered.insert(std::string(e.dir) + ":" + e.output);
    // The set's measured.txt (what `drift tcverify DIR` replays) says the same.
    size_t listed = 0;
    for (const auto& m : io::tc_read_measured(dir))
      if (m.output == e.output) {
        ++listed;
        CHECK(m.preset == e.preset);
        CHECK(m.c_zero == e.c_zero);
      }
    CHECK(listed == 1);
  }
  // Every result file shipped is in the table above.
  for (const auto& gpu : std::filesystem::directory_iterator(root)) {
    if (!gpu.is_directory()) continue;
    for (const auto& fmt : std::filesystem::directory_iterator(gpu.path())) {
      if (!fmt.is_directory()) continue;
      const std::string rel = gpu.path().filename().string() + "/" + fmt.path().filename().string();
      for (const auto& out : io::tc_outputs_present(fmt.path().string())) {
        CAPTURE(rel);
        CHECK(covered.count(rel + ":" + out) == 1);
      }
      CHECK(io::tc_read_measured(fmt.path().string()).size() == io::tc_outputs_present(fmt.path().string()).size());
    }
  }
}

TEST_CASE("tensorcore: the minimum alignment exponent of the Hopper models changes no measured result") {
  // min_exp_limit = -133 (H100TC.m) only matters when every product of a group lies below 2^-133;
  // the bf16 vectors are the only ones that could reach there. Replaying them without the clamp gives
  // the same 5000.
  TcPreset p = preset("h100_bf16");
  p.model.min_align_exp = kNoMinAlignExp;
  const auto r = verify_dir(std::string(DRIFT_SOURCE_DIR) + "/data/tensorcore/H100/bf16", p, {});
  CHECK(r.matched == 5000);
}

TEST_CASE("tensorcore: H200 presets are the H100 models (H200 is Hopper)") {
  // The reference repository's H200TC.m calls H100TC since commit abc3e16; before, it called B200TC,
  // whose FP8 parameters (neab 2: 25 kept bits, full fp32 result) measured H200 FP8 results contradict.
  size_t h200 = 0;
  for (const auto& p : tc_presets()) {
    if (p.gpu != "H200") continue;
    ++h200;
    CAPTURE(p.name);
    REQUIRE(p.name.rfind("h200", 0) == 0);
    const TcPreset h = preset(("h100" + p.name.substr(4)).c_str());
    const FusedModel &a = p.model, &b = h.model;
    CHECK(p.input == h.input);
    CHECK(p.output == h.output);
    CHECK(a.terms == b.terms);
    CHECK(a.kept_bits == b.kept_bits);
    CHECK(a.out_man_bits == b.out_man_bits);
    CHECK(a.final_rounding == b.final_rounding);
    CHECK(a.min_align_exp == b.min_align_exp);
    CHECK(a.in_emin == b.in_emin);
    CHECK(a.interleave == b.interleave);
    CHECK(a.promote_every == b.promote_every);
    CHECK(a.align_includes_acc == b.align_includes_acc);
    CHECK(a.sticky == b.sticky);
  }
  CHECK(h200 >= 6);
  // The FP8 one keeps 13 bits (1 + 2^-13 survives the cut at 2^-13; 2^-14 does not), as h100_fp8.
  CHECK(dot("h200_fp8", 0, {1, p2(-6), p2(-7)}, {1, p2(-7), p2(-7)}) == 1 + p2(-13));
  TcVerifyOptions c_zero;
  c_zero.c_zero = true;
  CHECK(verify_dir(std::string(DRIFT_SOURCE_DIR) + "/data/tensorcore/H100/E4M3", preset("h200_fp8_e4m3"), c_zero)
            .matched == 5000);
}

TEST_CASE("tensorcore: B200 FP8 adds c after the fused products, not inside the group") {
  // The published B200TC.m parameters align c with the 32 products and truncate once. The counts
  // below are those of scripts/tc_model_search.py (exact Python integers, written independently of
  // fused_accum.h) for the same model: 3207 and 3236 of 5000.
  const std::string root = std::string(DRIFT_SOURCE_DIR) + "/data/tensorcore/B200/";
  struct Published {
    const char *fmt, *name;
    int matched;
  };
  for (const Published& pub : {Published{"E4M3", "b200_fp8_e4m3", 3207}, Published{"E5M2", "b200_fp8_e5m2", 3236}}) {
    const std::string fmt = pub.fmt, name = pub.name;  // (clang: no structured bindings in CAPTURE's lambda)
    const int published = pub.matched;
    CAPTURE(name);
    TcPreset p = preset(pub.name);
    p.model.promote_every = 0;  // c in the group, as B200TC.m
    CHECK(verify_dir(root + fmt, p, {}).matched == static_cast<size_t>(published));
  }
  // By hand: c = 2^10 (fp32 ulp 2^-13) and one product 3*2^-9 * 2^-6 = 3*2^-15. The group alone is
  // 3*2^-15 (exact in fp32); 2^10 + 3*2^-15 lies above the midpoint 2^10 + 2^-14, so the IEEE addition
  // rounds up: 2^10 + 2^-13. With c aligned in the group (E = 10, cut at 2^-15: 3*2^-15 survives) the
  // sum is truncated to fp32: 2^10.
  CHECK(dot("b200_fp8", p2(10), {3 * p2(-9)}, {p2(-6)}) == p2(10) + p2(-13));
  FusedModel published = preset("b200_fp8").model;
  published.promote_every = 0;
  const double a[] = {3 * p2(-9)}, b[] = {p2(-6)};
  CHECK(fused_dot(p2(10), a, b, 1, published) == p2(10));
  // K = 64 is two instructions, each adding its group to the running sum with one rounding: with the
  // same product at indices 0 and 32, 2^10 + 3*2^-15 rounds to 2^10 + 2^-13 twice: 2^10 + 2^-12.
  double a64[64] = {}, b64[64] = {};
  a64[0] = a64[32] = 3 * p2(-9);
  b64[0] = b64[32] = p2(-6);
  CHECK(fused_dot(p2(10), a64, b64, 64, preset("b200_fp8").model) == p2(10) + p2(-12));
}

TEST_CASE("tensorcore: the B200 fp16-output minimum alignment exponent changes no measured result") {
  // -21 is B200TC.m's value (it was -15); the vectors do not constrain it: without the clamp, and with
  // the old -15, every case still matches. The preset follows the published model.
  const std::string dir = std::string(DRIFT_SOURCE_DIR) + "/data/tensorcore/B200/fp16";
  TcPreset p = preset("b200_fp16_out16");
  CHECK(p.model.min_align_exp == -21);
  for (int min_align : {kNoMinAlignExp, -15}) {
    p.model.min_align_exp = min_align;
    CHECK(verify_dir(dir, p, {}).matched == 5000);
  }
}

TEST_CASE("tensorcore: measured.txt") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "drift_tcverify_measured_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "X" / "fp16");
  auto write = [&](const char* text) {
    std::FILE* f = std::fopen((dir / "X" / "fp16" / io::kTcMeasuredFile).string().c_str(), "w");
    std::fputs(text, f);
    std::fclose(f);
  };
  const std::string set = (dir / "X" / "fp16").string();
  CHECK(io::tc_read_measured(set).empty());  // absent: nothing known
  CHECK(io::tc_measured_sets(dir.string()).empty());
  write("# comment\n\nfp32 h100_fp8_e4m3 c=zero  # WGMMA\nfp16 h100_fp8_e4m3_out16 c=file\n");
  const auto m = io::tc_read_measured(set);
  REQUIRE(m.size() == 2);
  CHECK(m[0].output == "fp32");
  CHECK(m[0].preset == "h100_fp8_e4m3");
  CHECK(m[0].c_zero);
  CHECK(!m[1].c_zero);
  CHECK(io::tc_measured_sets(dir.string()) == std::vector<std::string>{set});
  write("fp32 h100_fp8_e4m3\n");
  CHECK_THROWS_WITH_AS(io::tc_read_measured(set), doctest::Contains("measured.txt line 1: expected"), TcDataError);
  write("fp32 no_such_preset c=file\n");
  CHECK_THROWS_WITH_AS(io::tc_read_measured(set), doctest::Contains("unknown preset 'no_such_preset'"), TcDataError);
  write("fp16 h100_fp8_e4m3 c=file\n");
  CHECK_THROWS_WITH_AS(io::tc_read_measured(set), doctest::Contains("has fp32 output, not fp16"), TcDataError);
  write("fp32 h100_fp8_e4m3 c=zero\nfp32 h100_fp8_e5m2 c=zero\n");
  CHECK_THROWS_WITH_AS(io::tc_read_measured(set), doctest::Contains("line 2: output fp32 listed twice"), TcDataError);
  write("# nothing\n");
  CHECK_THROWS_WITH_AS(io::tc_read_measured(set), doctest::Contains("no '<fp32|fp16> <preset>"), TcDataError);
  fs::remove_all(dir);
}

TEST_CASE("tensorcore: hand-derived groups") {
  SUBCASE("alignment truncation loses a bit (V100 keeps 23 bits, A100 24)") {
    // 1*1 + (-2^-12)*(2^-12): E = 0. V100 keeps 23 fraction bits below 2^0, so the last kept bit is
    // 2^-23 and -2^-24 is truncated to 0: the result is 1, although 1 - 2^-24 is an fp32 number.
    CHECK(dot("v100_fp16", 0, {1, -p2(-12)}, {1, p2(-12)}) == 1.0);
    // A100 keeps one more bit (neab = 1): 2^-24 survives and the sum is exact.
    CHECK(dot("a100_fp16", 0, {1, -p2(-12)}, {1, p2(-12)}) == 1.0 - p2(-24));
  }
  SUBCASE("products are aligned unnormalised (significand in [1,4))") {
    // 1.5*1.5 = 2.25 has alignment exponent 0 + 0 = 0 (significand 2.25), so the cut is at 2^-23 and
    // two products 2^-12 * 2^-11 = 2^-23 both survive: 2.25 + 2^-22, an fp32 number (ulp at 2 is
    // 2^-22). Normalising 2.25 to exponent 1 first would cut at 2^-22 and lose both.
    CHECK(dot("v100_fp16", 0, {1.5, p2(-12), p2(-12)}, {1.5, p2(-11), p2(-11)}) == 2.25 + p2(-22));
  }
  SUBCASE("c takes part in the alignment") {
    // c = 2^24 sets E = 24; the cut is at 2^(24-23) = 2, so the product -1 vanishes: 2^24, although
    // 2^24 - 1 is an fp32 number.
    CHECK(dot("v100_fp16", p2(24), {1}, {-1}) == p2(24));
    // With c added after the products (late partial sum), the one rounding sees 2^24 - 1 exactly.
    FusedModel m = preset("v100_fp16").model;
    m.align_includes_acc = false;
    const double a[] = {1}, b[] = {-1};
    CHECK(fused_group(p2(24), a, b, 1, m) == p2(24) - 1);
  }
  SUBCASE("subnormal inputs count at the format's minimum exponent") {
    // fp16 2^-24 is subnormal: its exponent counts as -14, so 2^-24 * 2^15 aligns at -14 + 15 = 1 (its
    // value is only 2^-9). E = 1 puts the V100 cut at 2^-22, and 2^-12 * 2^-11 = 2^-23 is lost:
    // 2^-9 + 1 exactly, whereas the true sum 1 + 2^-9 + 2^-23 is an fp32 number.
    CHECK(dot("v100_fp16", 0, {p2(-24), 1, p2(-12)}, {p2(15), 1, p2(-11)}) == 1 + p2(-9));
  }
  SUBCASE("fp16 output: truncate first, then round to nearest") {
    // 1 + 2^-11 is the midpoint between fp16 neighbours 1 and 1 + 2^-10. A third product 2^-24 would
    // lift the exact sum above the midpoint (IEEE rne: 1 + 2^-10), but V100 cuts it (last kept bit
    // 2^-23), leaving a tie that goes to even: 1. A100 keeps 2^-24, so it rounds up.
    CHECK(dot("v100_fp16_out16", 0, {1, p2(-11), p2(-12)}, {1, 1, p2(-12)}) == 1.0);
    CHECK(dot("a100_fp16_out16", 0, {1, p2(-11), p2(-12)}, {1, 1, p2(-12)}) == 1 + p2(-10));
    // Overflow of the fp16 result: 2 * 65536 -> inf.
    CHECK(is_inf(dot("v100_fp16_out16", 0, {256, 256}, {256, 256})));
  }
  SUBCASE("Hopper FP8 keeps 13 bits") {
    // E4M3 2^-7 is subnormal (emin -6): 2^-6 * 2^-7 = 2^-13 aligns at -12 with significand 0.5. E = 0;
    // the cut is at 2^-13: 2^-13 survives, 2^-7 * 2^-7 = 2^-14 does not. Result 1 + 2^-13.
    CHECK(dot("h100_fp8", 0, {1, p2(-6), p2(-7)}, {1, p2(-7), p2(-7)}) == 1 + p2(-13));
    // 1.75 * 1.125 = 1.96875 (E = 0) plus 2^-9 * 2^-6 = 2^-15 (2^-9 is subnormal, so it aligns at
    // -6 - 6 = -12): the cut at 2^-13 removes it, 1.96875, where fp32 would hold 1.96875 + 2^-15.
    CHECK(dot("h100_fp8", 0, {1.75, p2(-9)}, {1.125, p2(-6)}) == 1.96875);
    // Sum 7.5 + 2^-10 + 2^-10: E = 2 (1.875 * 4 = 7.5, exponents 0 + 2), cut at 2^-11: both 2^-10 kept,
    // sum 7.5 + 2^-9 = 1.875048828125 * 4 needs 12 fraction bits: written exactly.
    CHECK(dot("h100_fp8", 0, {1.875, p2(-5), p2(-5)}, {4, p2(-5), p2(-5)}) == 7.5 + p2(-9));
    // ... but with 2^-12 pieces (2^-6 * 2^-6, aligned at -12) each is cut: 7.5.
    CHECK(dot("h100_fp8", 0, {1.875, p2(-6), p2(-6)}, {4, p2(-6), p2(-6)}) == 7.5);
  }
  SUBCASE("Hopper's emulated FP8 mma.sync with fp16 output") {
    // Products 0 and 1 (index mod 4 in {0, 1}) form the first fp16 group, product 2 the second. 1 and
    // 2^-6 * 2^-5 = 2^-11: the first group's 1 + 2^-11 is a tie between fp16 neighbours, rounded to
    // even, 1; the second group adds -1: +0, although the exact sum 2^-11 is an fp16 number (one
    // 32-term group, as the published FP8 parameters, would keep it).
    CHECK(dot("h100_fp8_e4m3_out16", 0, {1, p2(-6), 1}, {1, p2(-5), -1}) == 0.0);
    // c comes last: the products 2^-11 (index 0) and 2^-11 (index 2) sum to 2^-10 in the chain from
    // zero, and 1 + 2^-10 is an fp16 number. Were c = 1 in the first group, 1 + 2^-11 would tie to 1
    // twice.
    CHECK(dot("h100_fp8_e4m3_out16", 1, {p2(-6), 0, p2(-6)}, {p2(-5), 0, p2(-5)}) == 1 + p2(-10));
    // K = 64 is two instructions, each adding its 32 products to the running sum (promote_every = 32):
    // with 2^-11 at indices 0 and 32 and c = 1, each addition 1 + 2^-11 ties to 1, so the result is 1;
    // adding the two blocks' 2^-10 to c at once would give 1 + 2^-10.
    double a[64] = {}, b[64] = {};
    a[0] = a[32] = p2(-6);
    b[0] = b[32] = p2(-5);
    CHECK(fused_dot(1, a, b, 64, preset("h100_fp8_e4m3_out16").model) == 1.0);
  }
  SUBCASE("DeepSeek promotion every 128 products") {
    // Products: 16*16 = 256 at index 0, 2^-3 * 2^-3 = 2^-6 at index 128, zeros elsewhere. Without
    // promotion the group holding index 128 has c = 256 (E = 8, cut at 2^-5) and loses 2^-6: 256.
    // With promotion, 2^-6 is the second block's own partial sum, added to 256 in IEEE fp32: exact.
    double a[256] = {}, b[256] = {};
    a[0] = 16; b[0] = 16;
    a[128] = 0.125; b[128] = 0.125;
    CHECK(fused_dot(0, a, b, 256, preset("h100_fp8").model) == 256);
    CHECK(fused_dot(0, a, b, 256, preset("h100_fp8_promote128").model) == 256 + p2(-6));
    // c starts the outer accumulator: 1 + 256 + 2^-6.
    CHECK(fused_dot(1, a, b, 256, preset("h100_fp8_promote128").model) == 257 + p2(-6));
  }
  SUBCASE("sticky bit") {
    // V100 with a sticky bit: the two 2^-24 products are each cut to 0 with lost bits, so each adds a
    // sticky 1 at 2^-24: the sum is 1 + 2^-23 (rtz keeps it). Without sticky: 1.
    FusedModel m = preset("v100_fp16").model;
    const double a[] = {1, p2(-12), p2(-12)}, b[] = {1, p2(-12), p2(-12)};
    CHECK(fused_group(0, a, b, 3, m) == 1.0);
    m.sticky = true;
    CHECK(fused_group(0, a, b, 3, m) == 1 + p2(-23));
  }
  SUBCASE("special values and zeros") {
    const double inf = infinity(false);
    CHECK(is_nan(dot("a100_fp16", 0, {inf, 1}, {0, 1})));        // inf * 0
    CHECK(is_nan(dot("a100_fp16", 0, {inf, inf}, {1, -1})));     // +inf and -inf
    CHECK(dot("a100_fp16", 0, {inf, 1}, {-1, 1}) == -inf);
    CHECK(is_nan(dot("a100_fp16", quiet_nan(), {1}, {1})));
    CHECK(dot("a100_fp16", 0, {1, 1}, {1, -1}) == 0.0);           // exact cancellation: +0
    CHECK(!sign_bit(dot("a100_fp16", 0, {1, 1}, {1, -1})));
    CHECK(dot("a100_fp16", -3.0, {0}, {5}) == -3.0);              // no products: c
  }
  SUBCASE("groups chain through c") {
    // a100_tf32 groups of 4: 8 products of 1 and c = 0 -> 8; with c = 2^24 each group is cut at 2^0
    // (E = 24, 24 bits kept): the products survive, each group adds 4 to c (2^24 + 4 is an fp32
    // number, its ulp is 2), 2^24 + 8.
    double a[8], b[8];
    for (int i = 0; i < 8; ++i) a[i] = b[i] = 1;
    CHECK(fused_dot(0, a, b, 8, preset("a100_tf32").model) == 8);
    CHECK(fused_dot(p2(24), a, b, 8, preset("a100_tf32").model) == p2(24) + 8);
  }
}

TEST_CASE("tensorcore: strided and contiguous calls agree") {
  double a[64], b[128], bs[64];
  for (int i = 0; i < 64; ++i) {
    a[i] = (i % 7 - 3) * 0.375;
    bs[i] = (i % 5 - 2) * 1.25 + 0.0625 * (i % 3);
    b[2 * i] = bs[i];
    b[2 * i + 1] = 99;
  }
  for (const auto& p : tc_presets()) {
    if (p.input != "fp16") continue;
    CAPTURE(p.name);
    CHECK(fused_dot_strided(0.5, a, 1, b, 2, 64, p.model) == fused_dot(0.5, a, bs, 64, p.model));
  }
}

TEST_CASE("tensorcore: preset table") {
  std::set<std::string> names;
  for (const auto& p : tc_presets()) {
    CAPTURE(p.name);
    CHECK(find_format(p.input).has_value());
    CHECK(find_format(p.output).has_value());
    CHECK(fused_model_invalid(p.model) == nullptr);
    CHECK(p.model.out.bits == p.out_format.bits);
    // The emulated FP8 mma.sync works on the inputs unpacked to fp16.
    CHECK(p.model.in_emin == (p.model.interleave ? find_format("fp16")->emin : p.in_format.emin));
    CHECK(!p.source.empty());
    CHECK(!p.doc.empty());
    CHECK(names.insert(p.name).second);
    std::istringstream al(p.aliases);
    std::string w;
    while (al >> w) CHECK(names.insert(w).second);
  }
  // The names the issue asks for.
  for (const char* n : {"v100_fp16", "v100_fp16_out16", "a100_fp16", "a100_fp16_out16", "a100_bf16", "a100_tf32",
                        "h100_fp16", "h100_fp16_out16", "h100_bf16", "h100_tf32", "h100_fp8", "h100_fp8_promote128",
                        "l40s_fp16", "h200_fp16", "b200_fp16", "b200_fp8_e4m3_out16", "l40s_fp16_out16", "ada_fp16",
                        "ada_fp16_out16", "h200_fp8_e4m3_out16"})
    CHECK(find_tc_preset(n).has_value());
  // Minimum alignment exponents (issue 20): L40S -132, L40S fp16 output -20, B200 fp16 output -21; RTX
  // Ada (AdaTC.m) none.
  CHECK(preset("l40s_fp16").model.min_align_exp == -132);
  CHECK(preset("l40s_fp8_e4m3").model.min_align_exp == -132);
  CHECK(preset("l40s_fp16_out16").model.min_align_exp == -20);
  CHECK(preset("l40s_fp8_e5m2_out16").model.min_align_exp == -20);
  CHECK(preset("b200_fp16_out16").model.min_align_exp == -21);
  CHECK(preset("ada_fp8_e4m3").model.min_align_exp == kNoMinAlignExp);
  CHECK(tc_preset_with_output(preset("l40s_fp16"), "fp16")->name == "l40s_fp16_out16");
  CHECK(tc_preset_with_output(preset("b200_fp8_e4m3"), "fp16")->name == "b200_fp8_e4m3_out16");
  CHECK(tc_preset_with_output(preset("b200_fp8_e5m2_out16"), "fp32")->name == "b200_fp8_e5m2");
  CHECK(!find_tc_preset("no_such_gpu").has_value());
  CHECK(tc_preset_with_output(preset("v100_fp16"), "fp16")->name == "v100_fp16_out16");
  CHECK(!tc_preset_with_output(preset("a100_bf16"), "fp16").has_value());
  // The FP8 fp16-output variant promotes per instruction, not as the DeepSeek recipe.
  CHECK(tc_preset_with_output(preset("h100_fp8_e4m3"), "fp16")->name == "h100_fp8_e4m3_out16");
  CHECK(tc_preset_with_output(preset("h100_fp8_e4m3_out16"), "fp32")->name == "h100_fp8_e4m3");
  CHECK(!tc_preset_with_output(preset("h100_fp8_promote128"), "fp16").has_value());
}

TEST_CASE("tensorcore: tcverify reports bad input with file and line") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "drift_tcverify_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const char* name, const char* text) {
    std::FILE* f = std::fopen((dir / name).string().c_str(), "w");
    std::fputs(text, f);
    std::fclose(f);
  };
  const TcPreset p = preset("v100_fp16");
  // 1*1 + 1*1 + c 0 = 2 (0x40000000).
  write("a_X_fp16.txt", "3f800000 3f800000\n");
  write("b_X_fp16.txt", "3f800000 3f800000\n");
  write("c_X_fp32.txt", "00000000000000000000000000000000\n");
  write("d_X_fp32.txt", "01000000000000000000000000000000\n");
  const auto ok = verify_dir(dir.string(), p, {});
  CHECK(ok.matched == 1);
  CHECK(ok.total == 1);
  write("d_X_fp32.txt", "01000000000000000000000000000001\n");
  const auto bad = verify_dir(dir.string(), p, {});
  CHECK(bad.matched == 0);
  REQUIRE(bad.first_mismatches.size() == 1);
  CHECK(bad.first_mismatches[0].line == 1);
  CHECK(bad.first_mismatches[0].got == 0x40000000u);
  write("b_X_fp16.txt", "3f800000 3f80000g\n");
  CHECK_THROWS_WITH_AS(verify_dir(dir.string(), p, {}), doctest::Contains("b_X_fp16.txt line 1"), TcDataError);
  write("b_X_fp16.txt", "3f800000 3f800001\n");  // 1 + 2^-23 is not an fp16 value
  CHECK_THROWS_WITH_AS(verify_dir(dir.string(), p, {}), doctest::Contains("not a fp16 value"), TcDataError);
  write("b_X_fp16.txt", "3f800000 3f800000\n");
  write("c_X_fp32.txt", "0101\n");
  CHECK_THROWS_WITH_AS(verify_dir(dir.string(), p, {}), doctest::Contains("c_X_fp32.txt line 1"), TcDataError);
  fs::remove(dir / "c_X_fp32.txt");
  CHECK_THROWS_WITH_AS(verify_dir(dir.string(), p, {}), doctest::Contains("no c_*_fp32.txt"), TcDataError);
  fs::remove_all(dir);
}

}  // namespace test_tensorcore
