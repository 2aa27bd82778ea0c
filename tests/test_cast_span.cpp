// The SIMD span cast against its scalar twin (round_to, element by element): bit for bit and count
// for count, on every Highway target compiled into cast_span that this CPU runs. Also Philox's
// Random123 known-answer vectors and thread-count independence of cast_span_parallel.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/random.h"
#include "hwy/targets.h"

namespace drift::test_cast_span {
namespace {

struct Named {
  std::string name;
  Format f;
};

std::vector<Named> float_formats() {
  std::vector<Named> out;
  for (const auto& nf : format_catalogue())
    if (fits_float(nf.format)) out.push_back({nf.name, nf.format});
  return out;
}

struct SpecCase {
  std::string name;
  RoundSpec spec;
};

std::vector<SpecCase> rounding_variants() {
  std::vector<SpecCase> out;
  for (int m = 0; m <= static_cast<int>(Rounding::rto); ++m) {
    RoundSpec s;
    s.mode = static_cast<Rounding>(m);
    out.push_back({to_string(s.mode), s});
  }
  for (int bits : {1, 8, 24, 32}) {
    RoundSpec s;
    s.mode = Rounding::sr;
    s.sr_bits = bits;
    out.push_back({"sr" + std::to_string(bits), s});
  }
  return out;
}

std::vector<SpecCase> all_specs() {
  std::vector<SpecCase> out;
  for (const auto& base : rounding_variants())
    for (Overflow o : {Overflow::saturate, Overflow::ieee})
      for (Subnormals sub : {Subnormals::keep, Subnormals::flush}) {
        SpecCase c = base;
        c.spec.overflow = o;
        c.spec.subnormals = sub;
        c.name += std::string("/") + to_string(o) + "/" + to_string(sub);
        out.push_back(c);
      }
  return out;
}

std::string describe_stats(const CastStats& s) {
  return "clipped " + std::to_string(s.clipped) + " flushed " + std::to_string(s.flushed) + " subnormal " +
         std::to_string(s.subnormal) + " nan " + std::to_string(s.nan);
}

// Restores the real CPU's targets when a test leaves (also on a failed REQUIRE).
struct TargetMock {
  ~TargetMock() { hwy::SetSupportedTargetsForTest(0); }
};

// Runs the scalar twin once, then cast_span on every target; returns the number of configurations
// that disagreed (and reports the first differing element of each).
int compare_all_targets(const std::vector<float>& in, const Format& f, const SpecCase& sc, const std::string& what,
                        uint64_t seed = 1234, uint64_t stream = 7, uint64_t first = 99) {
  const size_t n = in.size();
  static std::vector<float> ref, got;  // reused: the exhaustive cases pass 2^23 values at a time
  ref.resize(n);
  got.resize(n);
  const CastStats ref_stats = cast_span_scalar(in.data(), ref.data(), n, f, sc.spec, seed, stream, first);
  int failures = 0;
  TargetMock mock;
  for (int64_t target : cast_span_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    REQUIRE(std::string(cast_span_target_name()) == hwy::TargetName(target));  // the mock took effect
    std::memset(got.data(), 0xAB, n * sizeof(float));
    const CastStats stats = cast_span(in.data(), got.data(), n, f, sc.spec, seed, stream, first);
    if (std::memcmp(ref.data(), got.data(), n * sizeof(float)) != 0) {
      size_t i = 0;
      while (bits_of(ref[i]) == bits_of(got[i])) ++i;
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s %s [%s] target %s: element %zu input %08x (%.9g): scalar %08x (%.9g) simd %08x (%.9g)",
                    what.c_str(), sc.name.c_str(), format_name(f).c_str(), hwy::TargetName(target), i,
                    bits_of(in[i]), static_cast<double>(in[i]), bits_of(ref[i]), static_cast<double>(ref[i]),
                    bits_of(got[i]), static_cast<double>(got[i]));
      FAIL_CHECK(buf);
      ++failures;
    } else if (!(stats == ref_stats)) {
      FAIL_CHECK(what << " " << sc.name << " [" << format_name(f) << "] target " << hwy::TargetName(target)
                      << ": counts differ: scalar " << describe_stats(ref_stats) << ", simd " << describe_stats(stats));
      ++failures;
    }
  }
  return failures;
}

// Every bit pattern with biased exponent field `field` and sign `sign` (all 2^23 mantissas).
std::vector<float> binade(int field, uint32_t sign) {
  std::vector<float> out(1u << 23);
  for (uint32_t m = 0; m < (1u << 23); ++m) out[m] = float_of((sign << 31) | (static_cast<uint32_t>(field) << 23) | m);
  return out;
}

// Formats outside the catalogue that take other paths: a subnormal range below fp32's normals
// (the kernel then needs the true exponent of fp32 subnormal inputs), no subnormals, no mantissa,
// a wider integer.
std::vector<Named> custom_formats() {
  std::vector<Named> out;
  std::string err;
  out.push_back({"e8m3 bias 130", *make_float_format(8, 3, 130, true, NanCode::ieee, true, &err)});
  out.push_back({"e5m2 no subnormals", *make_float_format(5, 2, std::nullopt, false, NanCode::ones, false, &err)});
  out.push_back({"e3m0", *make_float_format(3, 0, std::nullopt, false, NanCode::ones, true, &err)});
  out.push_back({"e6m5 bias 2", *make_float_format(6, 5, 2, false, NanCode::none, true, &err)});
  Format i16;
  i16.kind = Kind::integer;
  i16.exp_bits = 0;
  i16.man_bits = 15;
  i16.bias = 0;
  i16.inf = false;
  i16.nan = NanCode::none;
  i16.subnormals = false;
  derive_format(i16);
  out.push_back({"int16", i16});
  return out;
}

std::vector<float> special_values() {
  std::vector<float> out;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t a : {0x0u, 0x1u, 0x2u, 0x3u, 0x7fffffu, 0x800000u, 0x800001u, 0x3f800000u, 0x7f7fffffu, 0x7f800000u,
                       0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0x7fa00000u, 0x7f800100u})
      out.push_back(float_of(sign | a));
  }
  return out;
}

std::vector<float> random_patterns(size_t n, uint64_t seed) {
  std::vector<float> out(n);
  std::vector<uint32_t> words(n);
  random_fill(seed, 0, 0, words.data(), n);
  for (size_t i = 0; i < n; ++i) out[i] = float_of(words[i]);
  return out;
}

// Random values concentrated where a format's decisions happen: exponents spread from below its
// smallest subnormal to above its largest value, random mantissas and signs.
std::vector<float> random_in_range(const Format& f, size_t n, uint64_t seed) {
  std::vector<uint32_t> words(2 * n);
  random_fill(seed, 1, 0, words.data(), 2 * n);
  const int lo = std::max(1, f.quantum_min + 127 - 3);
  const int hi = std::min(254, f.emax + 127 + 2);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t field = static_cast<uint32_t>(lo + static_cast<int>(words[2 * i + 1] % static_cast<uint32_t>(hi - lo + 1)));
    out[i] = float_of((words[2 * i] & 0x807fffffu) | (field << 23));
  }
  return out;
}

}  // namespace

TEST_CASE("philox4x32-10 matches Random123's known-answer vectors") {
  r123::Philox4x32 gen;
  struct Kat {
    r123::Philox4x32::ctr_type ctr;
    r123::Philox4x32::key_type key;
    uint32_t expect[4];
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, {{0xffffffff, 0xffffffff}},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, {{0xa4093822, 0x299f31d0}},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const auto out = gen(k.ctr, k.key);
    for (int w = 0; w < 4; ++w) CHECK(out.v[w] == k.expect[w]);
    // drift's mapping: key = (seed lo, seed hi), counter = (block lo, block hi, stream lo, stream hi),
    // and index = 4 * block + word.
    const uint64_t seed = k.key.v[0] | (uint64_t{k.key.v[1]} << 32);
    const uint64_t block = k.ctr.v[0] | (uint64_t{k.ctr.v[1]} << 32);
    const uint64_t stream = k.ctr.v[2] | (uint64_t{k.ctr.v[3]} << 32);
    for (int w = 0; w < 4; ++w) {
      // Only the low 62 bits of a block number are reachable through a 64-bit element index.
      if (block >> 62) continue;
      CHECK(random_u32(seed, stream, 4 * block + static_cast<uint64_t>(w)) == k.expect[w]);
    }
    const auto blk = philox_block(seed, stream, block);
    for (int w = 0; w < 4; ++w) CHECK(blk.v[w] == k.expect[w]);
  }
  // random_fill agrees with random_u32 from any starting index.
  std::vector<uint32_t> words(37);
  random_fill(5, 9, 3, words.data(), words.size());
  for (size_t i = 0; i < words.size(); ++i) CHECK(words[i] == random_u32(5, 9, 3 + i));
}

TEST_CASE("fits_float: every catalogue format except fp64; cast_span rejects the rest") {
  for (const auto& nf : format_catalogue()) CHECK_MESSAGE(fits_float(nf.format) == (std::string(nf.name) != "fp64"), nf.name);
  const Format fp64 = *find_format("fp64");
  float x = 1.0f, y = 0.0f;
  CHECK_THROWS_AS(cast_span(&x, &y, 1, fp64, RoundSpec{}, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(cast_span_scalar(&x, &y, 1, fp64, RoundSpec{}, 0, 0, 0), std::invalid_argument);
  RoundSpec bad;
  bad.mode = Rounding::sr;
  bad.sr_bits = 33;
  CHECK_THROWS_AS(cast_span(&x, &y, 1, *find_format("bf16"), bad, 0, 0, 0), std::invalid_argument);
  CHECK(!cast_span_targets().empty());
  MESSAGE("cast_span dispatches to " << std::string(cast_span_target_name()) << "; targets tested: " << cast_span_targets().size());
}

TEST_CASE("cast_span counts what happened (fp8_e4m3, rne, saturate)") {
  const Format f = *find_format("fp8_e4m3");
  RoundSpec spec;
  // 449 rounds down onto 448 (not clipped); 480 overflows (clipped); inf clipped; 2^-10 underflows
  // to zero (flushed); 2^-8 is subnormal; NaN stays NaN; 0 is none of them.
  const std::vector<float> in = {449.0f, 480.0f, -1e30f, float_of(0xff800000u), 0x1p-10f, 0x1p-8f,
                                 float_of(0x7fc00000u), 0.0f, 1.0f};
  std::vector<float> out(in.size());
  const CastStats s = cast_span(in.data(), out.data(), in.size(), f, spec, 0, 0, 0);
  CHECK(out[0] == 448.0f);
  CHECK(out[1] == 448.0f);
  CHECK(out[2] == -448.0f);
  CHECK(out[3] == -448.0f);
  CHECK(bits_of(out[4]) == 0u);
  CHECK(out[5] == 0x1p-8f);
  CHECK(out[6] != out[6]);
  CHECK(s.clipped == 3);
  CHECK(s.flushed == 1);
  CHECK(s.subnormal == 1);
  CHECK(s.nan == 1);
  // Under IEEE overflow, e4m3 (no inf) overflows to NaN: clipped and NaN.
  spec.overflow = Overflow::ieee;
  const CastStats t = cast_span(in.data(), out.data(), in.size(), f, spec, 0, 0, 0);
  CHECK(t.clipped == 3);
  CHECK(t.nan == 4);
}

TEST_CASE("cast_span == scalar core on special values and random bit patterns, every target and spec") {
  std::vector<float> in = special_values();
  const std::vector<float> rnd = random_patterns(1 << 18, 42);
  in.insert(in.end(), rnd.begin(), rnd.end());
  in.push_back(1.5f);  // odd length: exercises the tail
  // 2^19 patterns per format and spec, 40 specs, 18 formats: about 3.8e8 per target.
  std::vector<Named> formats = float_formats();
  for (const auto& c : custom_formats()) {
    REQUIRE(fits_float(c.f));
    formats.push_back(c);
  }
  for (const auto& nf : formats) {
    // Half the inputs anywhere in fp32, half where this format's decisions are.
    std::vector<float> mine = in;
    const std::vector<float> near = random_in_range(nf.f, 1 << 18, 43);
    mine.insert(mine.end(), near.begin(), near.end());
    for (const auto& sc : all_specs()) CHECK(compare_all_targets(mine, nf.f, sc, "random") == 0);
  }
}

TEST_CASE("cast_span == scalar core exhaustively near each format's boundaries, every target") {
  // For every format: all 2^25 patterns (both signs, every mantissa) of two fp32 binades: the one
  // just below the format's smallest normal (subnormal results, rounding up to min_normal,
  // underflow and flushing; for fp32-range formats this is fp32's own subnormals) and the one
  // holding its largest value (rounding onto max_finite, the overflow threshold, overflow).
  // Runtime bounds the spec matrix here (the random-pattern test runs all 40 specs on every format):
  // format k runs rounding variant k mod 10 (rne rna rtz rup rdn rto sr1 sr8 sr24 sr32) with
  // overflow and subnormal handling alternating, so every variant and both settings of each run
  // exhaustively somewhere; the headline formats also run rne/saturate/keep.
  const auto variants = rounding_variants();
  const auto formats = float_formats();
  for (size_t k = 0; k < formats.size(); ++k) {
    const Format& f = formats[k].f;
    const int lowest = f.kind == Kind::integer ? 0 : f.emin;
    const int below_normal = std::clamp(lowest + 127 - 1, 0, 254);
    const int top = std::clamp(f.emax + 127, 1, 254);
    std::vector<int> fields = {below_normal};
    if (top != below_normal) fields.push_back(top);
    std::vector<SpecCase> specs;
    SpecCase c = variants[k % variants.size()];
    c.spec.overflow = k % 2 ? Overflow::ieee : Overflow::saturate;
    c.spec.subnormals = (k / 2) % 2 ? Subnormals::flush : Subnormals::keep;
    c.name += std::string("/") + to_string(c.spec.overflow) + "/" + to_string(c.spec.subnormals);
    specs.push_back(c);
    const std::string& name = formats[k].name;
    if ((name == "bf16" || name == "fp8_e4m3" || name == "fp4_e2m1") && c.name != "rne/saturate/keep")
      specs.push_back({"rne/saturate/keep", RoundSpec{}});
    // One binade and sign at a time (2^23 patterns), each with its own element indices.
    for (size_t b = 0; b < 2 * fields.size(); ++b) {
      const std::vector<float> in = binade(fields[b / 2], static_cast<uint32_t>(b % 2));
      for (const auto& sc : specs)
        CHECK(compare_all_targets(in, f, sc, "exhaustive " + name + " field " + std::to_string(fields[b / 2]), 1234,
                                  7, b << 23) == 0);
    }
  }
}

// The formats the rne kernel (cast_rne-inl.h) takes in the catalogue, with both overflow and both
// subnormal settings: every fp32 exponent field and sign, with mantissas that put every pattern of
// the rounding decision (just below, at and above half; zero and all-ones discarded bits; an odd and
// an even kept bit) at every shift from 1 to 23, plus random mantissas.
TEST_CASE("cast_span rne kernel == scalar core: every exponent, rounding boundaries at every shift, every target") {
  std::vector<float> in;
  std::vector<uint32_t> words(4096 + 1024);
  for (uint32_t field = 0; field < 256; ++field)
    for (uint32_t sign = 0; sign < 2; ++sign) {
      random_fill(field, sign, 0, words.data(), words.size());
      std::vector<uint32_t> mants(words.begin(), words.begin() + 4096);
      for (uint32_t t = 1; t <= 23; ++t) {
        const uint32_t half = 1u << (t - 1);
        for (uint32_t low : {0u, 1u, half - 1, half, half + 1, (half << 1) - 1})
          for (uint32_t k = 0; k < 8; ++k) {
            const uint32_t high = k < 2 ? k : words[4096 + t * 8 + k];  // kept bits ...0 and ...1, then random
            mants.push_back(((high << t) | low) & 0x7fffffu);
          }
      }
      for (uint32_t m : mants) in.push_back(float_of((sign << 31) | (field << 23) | m));
    }
  int checked = 0;
  for (const auto& nf : float_formats()) {
    if (nf.f.kind != Kind::floating || nf.f.quantum_mant > 22) continue;  // the kernel's formats
    for (const auto& sc : all_specs()) {
      if (sc.spec.mode != Rounding::rne) continue;
      CHECK(compare_all_targets(in, nf.f, sc, "rne boundaries") == 0);
      ++checked;
    }
  }
  CHECK(checked == 10 * 4);  // tf32, bf16, fp16, the four fp8s, two fp6s and fp4 under the four specs
  // The kernel is the one these formats take (else the comparisons above test the general kernel).
  using Rne = detail::CastParams::Rne;
  for (const char* name : {"bf16", "tf32"}) CHECK(prepare_span_cast(*find_format(name), RoundSpec{}).params.rne.kind == Rne::const_shift);
  for (const char* name : {"fp16", "fp8_e4m3", "fp8_e5m2fnuz", "fp4_e2m1"})
    CHECK(prepare_span_cast(*find_format(name), RoundSpec{}).params.rne.kind == Rne::var_shift);
  RoundSpec sr;
  sr.mode = Rounding::sr;
  CHECK(prepare_span_cast(*find_format("bf16"), sr).params.rne.kind == Rne::none);
  CHECK(prepare_span_cast(*find_format("int8"), RoundSpec{}).params.rne.kind == Rne::none);
  CHECK(prepare_span_cast(*find_format("e8m0"), RoundSpec{}).params.rne.kind == Rne::none);
}

// Every one of the 2^32 fp32 inputs through bf16 and fp8_e4m3 under rne (saturate with subnormals
// kept, IEEE overflow, flushing), and through fp8_e5m2, fp4_e2m1 and fp16 (saturate, kept: the
// other variable-shift formats, whose subnormal grid the kernel rounds onto by a float add), on
// every target, against the scalar core, bits and counts. About 3 minutes of one core per spec: not
// in CI (the test above covers every exponent and the rounding boundaries at every shift); run by
// hand with
//   drift_tests -tc='*all 2^32*' --no-skip
TEST_CASE("cast_span rne kernel == scalar core on all 2^32 fp32 inputs" * doctest::skip()) {
  constexpr uint64_t kPiece = uint64_t{1} << 24;
  std::vector<float> in(kPiece);
  RoundSpec ieee, flush;
  ieee.overflow = Overflow::ieee;
  flush.subnormals = Subnormals::flush;
  const SpecCase specs[] = {{"rne/saturate/keep", RoundSpec{}}, {"rne/ieee/keep", ieee}, {"rne/saturate/flush", flush}};
  for (const std::string name : {"bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "fp16"})
    for (const SpecCase& sc : specs) {
      if (name != "bf16" && name != "fp8_e4m3" && sc.name != std::string("rne/saturate/keep")) continue;
      const Format f = *find_format(name);
      int failures = 0;
      for (uint64_t base = 0; base < (uint64_t{1} << 32) && failures == 0; base += kPiece) {
        for (uint64_t i = 0; i < kPiece; ++i) in[i] = float_of(static_cast<uint32_t>(base + i));
        failures += compare_all_targets(in, f, sc, "all inputs, piece " + std::to_string(base >> 24));
      }
      CHECK(failures == 0);
      MESSAGE(name << " " << sc.name << ": all 2^32 inputs agree on " << cast_span_targets().size() << " targets");
    }
}

TEST_CASE("cast_span_parallel: same bits and counts at 1, 2 and 4 threads") {
  const Format f = *find_format("fp8_e4m3");
  RoundSpec spec;
  spec.mode = Rounding::sr;
  spec.sr_bits = 8;
  const std::vector<float> in = random_patterns((1 << 20) + 12345, 7);
  std::vector<float> serial(in.size());
  const CastStats ref = cast_span_scalar(in.data(), serial.data(), in.size(), f, spec, 3, 4, 5);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 4}) {
    omp_set_num_threads(threads);
    std::vector<float> out(in.size());
    const CastStats s = cast_span_parallel(in.data(), out.data(), in.size(), f, spec, 3, 4, 5);
    CHECK_MESSAGE(std::memcmp(out.data(), serial.data(), in.size() * sizeof(float)) == 0, threads << " threads");
    CHECK_MESSAGE(s == ref, threads << " threads");
  }
  omp_set_num_threads(saved);
}

TEST_CASE("block_amax == a plain loop over the encodings: block sizes, ragged ends, NaN/inf, every target") {
  // Random bit patterns (every class: zeros, subnormals, normals, inf, NaN) with a few rows of
  // only finite values; the reference takes the largest finite |x| by comparing floats.
  const size_t n = 1000;
  std::vector<float> row(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = random_u32(11, 3, i);
    float v;
    uint32_t u = (i % 97 == 5) ? 0x7fc00000u : (i % 89 == 3) ? 0xff800000u : r;
    if ((i / 200) % 2 == 1 && ((u & 0x7f800000u) == 0x7f800000u)) u &= 0xbfffffffu;  // finite stretches
    std::memcpy(&v, &u, sizeof v);
    row[i] = v;
  }
  const std::vector<int64_t> targets = cast_span_targets();  // (before any mock narrows the list)
  REQUIRE(!targets.empty());
  TargetMock mock;
  for (size_t b : {size_t{1}, size_t{7}, size_t{16}, size_t{32}, size_t{33}, size_t{128}, n}) {
    for (size_t len : {n, n - 5}) {
      CAPTURE(b);
      CAPTURE(len);
      const size_t blocks = (len + b - 1) / b;
      std::vector<float> want_amax(blocks, 0.0f);
      std::vector<uint32_t> want_bad(blocks, 0);
      for (size_t i = 0; i < len; ++i) {
        const float a = std::fabs(row[i]);
        if (!std::isfinite(a)) ++want_bad[i / b];
        else if (a > want_amax[i / b]) want_amax[i / b] = a;
      }
      for (int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(hwy::TargetName(target));
        std::vector<float> amax(blocks, -1.0f);
        std::vector<uint32_t> bad(blocks, 99);
        block_amax(row.data(), len, b, amax.data(), bad.data());
        CHECK(std::memcmp(amax.data(), want_amax.data(), blocks * sizeof(float)) == 0);
        CHECK(bad == want_bad);
      }
    }
  }
}

}  // namespace drift::test_cast_span
