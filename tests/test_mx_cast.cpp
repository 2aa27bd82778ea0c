// The one-pass MX kernels (arith/mx_cast.h) against a reference built from other parts: each
// block's amax in double, its exponent from std::frexp (floor(log2 amax) - emax + offset, clamped
// to [-127, 127]), its products 2^-e * x in double (exact) and, where every one is a float, the
// scalar cast (cast_span_scalar, the twin the SIMD cast is tested against) for the elements and
// the counts. On every SIMD target compiled in, for blocks of every kind the quantizer meets: the
// binades from the subnormals to the top of fp32, all-zero blocks, NaN and inf, and the two kinds
// of block whose scaled values a float cannot hold exactly (scaled down below fp32's normal range,
// scaled up past its top by a large negative offset), which the kernels must leave to the caller.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/mx_cast.h"
#include "hwy/targets.h"
#include "same_bits.h"

namespace drift::test_mx_cast {
namespace {

using testing::same_bits;

constexpr size_t kB = 32;

struct Expected {
  std::vector<uint8_t> status;
  std::vector<double> scale;          // (blocks without NaN/inf)
  std::vector<float> out;             // (written blocks)
  CastStats cast;                     // over the written blocks
  uint64_t nonfinite = 0, scales = 0;
  float amax = 0;
  int e_min = 0, e_max = 0;
  int64_t e_sum = 0;
  std::vector<uint32_t> hist = std::vector<uint32_t>(255, 0);
};

Expected reference(const std::vector<std::vector<float>>& blocks, const Format& f, int offset,
                   const RoundSpec& rne = RoundSpec{}) {
  Expected x;
  bool first = true;
  for (const std::vector<float>& blk : blocks) {
    double amax = 0;
    uint64_t bad = 0;
    for (float v : blk) {
      if (!std::isfinite(v)) ++bad;
      else amax = std::max(amax, std::fabs(static_cast<double>(v)));
    }
    x.amax = std::max(x.amax, static_cast<float>(amax));
    x.out.insert(x.out.end(), blk.size(), 0.0f);
    if (bad) {
      x.nonfinite += bad;
      x.status.push_back(kMxNonFinite);
      x.scale.push_back(NAN);
      continue;
    }
    int e = -127;
    if (amax > 0) {
      int ex;
      std::frexp(amax, &ex);  // amax = m * 2^ex, m in [0.5, 1): floor(log2 amax) = ex - 1
      e = std::clamp(ex - 1 - f.emax + offset, -127, 127);
      ++x.scales;
      x.e_min = first ? e : std::min(x.e_min, e);
      x.e_max = first ? e : std::max(x.e_max, e);
      first = false;
      x.e_sum += e;
      ++x.hist[e + 127];
    }
    x.scale.push_back(std::ldexp(1.0, e));
    std::vector<float> scaled(blk.size());
    bool exact = true;
    for (size_t i = 0; i < blk.size(); ++i) {
      const double p = std::ldexp(static_cast<double>(blk[i]), amax > 0 ? -e : 0);  // exact in double
      scaled[i] = static_cast<float>(p);
      exact = exact && static_cast<double>(scaled[i]) == p;
    }
    if (!exact) {
      x.status.push_back(kMxScaleInexact);
      continue;
    }
    x.status.push_back(kMxWritten);
    x.cast += cast_span_scalar(scaled.data(), x.out.data() + x.out.size() - blk.size(), blk.size(), f, rne, 0, 0, 0);
  }
  return x;
}

// Blocks of every kind; `clean`: none that a kernel leaves (no NaN/inf, every scaled value exact
// under offsets >= -2).
std::vector<std::vector<float>> block_kinds(bool clean, size_t h, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<std::vector<float>> blocks;
  for (int binade = -149; binade <= 127; binade += 9) {  // random values below 2^binade
    std::vector<float> b(h);
    for (float& v : b) v = std::ldexp(unit(rng), binade);
    blocks.push_back(b);
  }
  std::vector<float> zeros(h, 0.0f);
  zeros[1 % h] = -0.0f;
  blocks.push_back(zeros);
  std::vector<float> subnormal(h);
  for (float& v : subnormal) v = std::ldexp(unit(rng), -130);
  blocks.push_back(subnormal);
  std::vector<float> top(h, -3.4028234663852886e38f);  // fp32's largest: saturates
  top[0] = 1.0f;
  blocks.push_back(top);
  std::vector<float> tiny_exact(h, 0.5f);
  tiny_exact[0] = 0x1p100f;
  tiny_exact[h - 1] = 0x1p-40f;  // scaled by 2^-92 (e4m3): 2^-132, a subnormal float, exact
  blocks.push_back(tiny_exact);
  if (!clean) {
    std::vector<float> tiny_inexact = tiny_exact;
    tiny_inexact[h - 1] = 0x1.000002p-40f;  // (1 + 2^-23) 2^-132 has a bit below 2^-149
    blocks.push_back(tiny_inexact);
    std::vector<float> nan = blocks[3], inf = blocks[5];
    nan[h / 2] = NAN;
    inf[0] = -INFINITY;
    blocks.push_back(nan);
    blocks.push_back(inf);
  }
  return blocks;
}

void check_tally(const MxCastTally& t, const Expected& x) {
  CHECK(t.cast == CastStats{x.cast.clipped, x.cast.flushed, x.cast.subnormal, t.cast.nan});
  CHECK(t.nonfinite == x.nonfinite);
  CHECK(same_bits(t.amax, x.amax));
  CHECK(t.scales == x.scales);
  if (x.scales) {
    CHECK(t.e_min == x.e_min);
    CHECK(t.e_max == x.e_max);
    CHECK(t.e_sum == x.e_sum);
  }
  for (int e = -127; e <= 127; ++e) {
    CAPTURE(e);
    CHECK(t.hist[e + 127] == x.hist[e + 127]);
  }
}

// mx_cast_blocks over `in` (blocks of kB) against the expected statuses, scales, written elements
// and tally.
void check_blocks_kernel(const SpanCast& cast, const std::vector<float>& in, int shift, const Expected& x) {
  const size_t nblocks = in.size() / kB;
  std::vector<float> out(in.size(), 7.0f);
  std::vector<double> scale(nblocks, 7.0);
  std::vector<uint8_t> status(nblocks, 9);
  MxCastTally t;
  mx_cast_blocks(cast, in.data(), out.data(), nblocks, kB, shift, scale.data(), status.data(), &t);
  for (size_t bi = 0; bi < nblocks; ++bi) {
    CAPTURE(bi);
    REQUIRE(status[bi] == x.status[bi]);
    if (status[bi] != kMxNonFinite) CHECK(scale[bi] == x.scale[bi]);
    if (status[bi] == kMxWritten)
      for (size_t i = bi * kB; i < (bi + 1) * kB; ++i) CHECK(same_bits(out[i], x.out[i]));
  }
  check_tally(t, x);
}

// Restores the real CPU's targets when a test leaves.
struct TargetMock {
  ~TargetMock() { hwy::SetSupportedTargetsForTest(0); }
};

}  // namespace

TEST_CASE("mx_cast_blocks: each block's scale, fate, elements and counts as the scalar core gives them") {
  TargetMock restore;
  // The MX rule (saturating, subnormals kept: the kernels' lean rounding) and two others: E5M2's
  // overflow to inf, and subnormal results flushed.
  RoundSpec to_inf, flush;
  to_inf.overflow = Overflow::ieee;
  flush.subnormals = Subnormals::flush;
  const struct {
    const char* name;
    RoundSpec spec;
  } specs[] = {{"saturate", RoundSpec{}}, {"ieee overflow", to_inf}, {"flush", flush}};
  for (const char* name : {"fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1"})
    for (const auto& sp : specs)
      for (int offset : {0, -2, -140}) {
        CAPTURE(std::string(name));
        CAPTURE(std::string(sp.name));
        CAPTURE(offset);
        const Format f = *find_format(name);
        const SpanCast cast = prepare_span_cast(f, sp.spec);
        const std::vector<std::vector<float>> blocks = block_kinds(false, kB, 7);
        std::vector<float> in;
        for (const auto& b : blocks) in.insert(in.end(), b.begin(), b.end());
        const Expected x = reference(blocks, f, offset, sp.spec);
        // The cases the kernel must leave are there: the NaN and the inf block, and a block scaled
        // below fp32's normal range (e5m2 scales the tiny element by 2^-85 only: a normal float) or
        // past its top.
        CHECK(std::count(x.status.begin(), x.status.end(), kMxNonFinite) == 2);
        if (std::string(name) != "fp8_e5m2" || offset == -140)
          CHECK(std::count(x.status.begin(), x.status.end(), kMxScaleInexact) > 0);
        for (int64_t target : cast_span_targets()) {
          hwy::SetSupportedTargetsForTest(target);
          REQUIRE(std::string(mx_cast_target_name()) == hwy::TargetName(target));
          CAPTURE(hwy::TargetName(target));
          REQUIRE(mx_cast_applies(cast, kB));
          check_blocks_kernel(cast, in, f.emax - offset, x);
        }
      }
}

TEST_CASE("mx_cast_band: blocks down the columns of a band, all or nothing, as the scalar core gives them") {
  TargetMock restore;
  RoundSpec to_inf;  // (E5M2's overflow to inf: the kernel's general rounding, not its lean one)
  to_inf.overflow = Overflow::ieee;
  const struct {
    const char* name;
    RoundSpec spec;
  } cases[] = {{"fp8_e4m3", RoundSpec{}}, {"fp8_e5m2", to_inf}};
  for (const auto& fc : cases) {
    for (size_t h : {size_t{32}, size_t{7}}) {  // (a last band shorter than a block)
      for (bool clean : {true, false}) {
        CAPTURE(std::string(fc.name));
        CAPTURE(h);
        CAPTURE(clean);
        const Format f = *find_format(fc.name);
        const SpanCast cast = prepare_span_cast(f, fc.spec);
        const std::vector<std::vector<float>> blocks = block_kinds(clean, h, 11);
        const size_t n = blocks.size(), ld = n + 3;  // (n: whole vectors and a ragged end)
        std::vector<float> in(h * ld, 5.0f);
        for (size_t j = 0; j < n; ++j)
          for (size_t r = 0; r < h; ++r) in[r * ld + j] = blocks[j][r];
        const Expected x = reference(blocks, f, 0, fc.spec);
        for (int64_t target : cast_span_targets()) {
          hwy::SetSupportedTargetsForTest(target);
          REQUIRE(std::string(mx_cast_target_name()) == hwy::TargetName(target));
          CAPTURE(hwy::TargetName(target));
          std::vector<float> out(h * n, 7.0f);
          const size_t stride = 3;
          std::vector<double> scale(n * stride, 7.0);
          MxCastTally t;
          const bool done = mx_cast_band(cast, in.data(), ld, h, n, f.emax, out.data(), scale.data(), stride, &t);
          REQUIRE(done == clean);
          if (!done) continue;
          for (size_t j = 0; j < n; ++j) {
            CAPTURE(j);
            CHECK(scale[j * stride] == x.scale[j]);
            for (size_t r = 0; r < h; ++r) CHECK(same_bits(out[r * n + j], x.out[j * h + r]));
          }
          check_tally(t, x);
        }
      }
    }
  }
}

// Many blocks whose exponents repeat from one block to the next (as a real tensor's do) and a
// few all-zero and NaN blocks among them: the kernels count each exponent in one of four parts by
// the block's lane, merged at the end; the tally must be the scalar one.
TEST_CASE("mx_cast kernels: many blocks sharing a few exponents, tallied as the scalar core tallies them") {
  TargetMock restore;
  const Format f = *find_format("fp8_e4m3");
  const SpanCast cast = prepare_span_cast(f, RoundSpec{});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  auto blocks_of = [&](size_t count, size_t h, bool with_nan) {
    std::vector<std::vector<float>> blocks;
    int binade = 0;
    for (size_t i = 0; i < count; ++i) {
      if (rng() % 4 == 0) binade = static_cast<int>(rng() % 3) - 1;  // runs of one exponent, three in all
      std::vector<float> b(h);
      for (float& v : b) v = std::ldexp(unit(rng), binade);
      b[rng() % h] = std::ldexp(rng() % 2 ? 1.0f : -1.0f, binade);  // amax's binade fixed: 2^binade
      if (i % 50 == 7) std::fill(b.begin(), b.end(), 0.0f);
      if (with_nan && i % 37 == 11) b[rng() % h] = NAN;
      blocks.push_back(b);
    }
    return blocks;
  };
  SUBCASE("mx_cast_blocks") {
    const std::vector<std::vector<float>> blocks = blocks_of(1001, kB, true);
    std::vector<float> in;
    for (const auto& b : blocks) in.insert(in.end(), b.begin(), b.end());
    const Expected x = reference(blocks, f, 0);
    REQUIRE(std::set<uint32_t>(x.hist.begin(), x.hist.end()).size() > 2);  // (three exponents, counts in hundreds)
    for (int64_t target : cast_span_targets()) {
      hwy::SetSupportedTargetsForTest(target);
      CAPTURE(hwy::TargetName(target));
      check_blocks_kernel(cast, in, f.emax, x);
    }
  }
  SUBCASE("mx_cast_band") {
    for (size_t n : {size_t{300}, size_t{64}, size_t{96}, size_t{5}}) {  // (chunks and a short end, one chunk,
      // whole vectors short of a chunk, one short vector)
      CAPTURE(n);
      const size_t h = 32, ld = n + 1;
      const std::vector<std::vector<float>> blocks = blocks_of(n, h, false);
      std::vector<float> in(h * ld, 5.0f);
      for (size_t j = 0; j < n; ++j)
        for (size_t r = 0; r < h; ++r) in[r * ld + j] = blocks[j][r];
      const Expected x = reference(blocks, f, 0);
      for (int64_t target : cast_span_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(hwy::TargetName(target));
        std::vector<float> out(h * n, 7.0f);
        std::vector<double> scale(n, 7.0);
        MxCastTally t;
        REQUIRE(mx_cast_band(cast, in.data(), ld, h, n, f.emax, out.data(), scale.data(), 1, &t));
        for (size_t j = 0; j < n; ++j) {
          CAPTURE(j);
          CHECK(scale[j] == x.scale[j]);
          for (size_t r = 0; r < h; ++r) CHECK(same_bits(out[r * n + j], x.out[j * h + r]));
        }
        check_tally(t, x);
      }
    }
  }
}

}  // namespace drift::test_mx_cast
