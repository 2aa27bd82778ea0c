// A call without telemetry (MatmulContext::telemetry = false, a training step whose statistics no
// metrics line reports) leaves operand statistics out where they cost time: the MX one-pass casts'
// counts and scale tallies, and the scan of an fp32 operand read in place (the kernel then finds a
// NaN or inf among its results). Everything else must be what the call with telemetry gives: C bit
// for bit, the route (fast kernel or reference), the swamping counts when asked for, a NaN or inf
// still sending the call to the reference with its count, and the MX casts' values, scales and
// block fates. With telemetry on, the statistics are the full ones (checked against an
// element-by-element count here).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "arith/mx_cast.h"
#include "arith/random.h"
#include "same_bits.h"

namespace test_matmul_telemetry_off {

using namespace drift;
using drift::testing::same_bits;

namespace {

// rows x cols floats (row stride ld) over about 2^-140 ... 2^20, so that the MX casts flush and
// clamp some, and the fp32 operands hold subnormals.
// Without `tiny`, over 2^-20 ... 2^20 only (the swamping counts' fast path needs products above
// 2^-100).
std::vector<float> values(size_t rows, size_t cols, size_t ld, uint64_t seed, bool tiny = true) {
  std::vector<float> v(rows * ld, 0.0f);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const uint32_t bits = random_u32(seed, 11, r * ld + c);
      const double u = (1 + (bits & 255) / 256.0) * ((bits >> 8) & 1 ? -1 : 1);
      const int e = tiny && (bits >> 9) % 8 == 0 ? -140 + static_cast<int>((bits >> 12) % 20)
                                                 : static_cast<int>((bits >> 12) % 41) - 20;
      v[r * ld + c] = static_cast<float>(std::ldexp(u, e));
    }
  return v;
}

MatmulPolicy policy_of(const char* name) {
  if (std::strcmp(name, "fp32") == 0) return MatmulPolicy{};
  MatmulPolicy p;
  p.a.format = p.b.format = *find_format(name);
  p.a.scaling.kind = p.b.scaling.kind = ScaleKind::block;
  p.a.scaling.block = p.b.scaling.block = 32;
  p.a.round.overflow = p.b.round.overflow = Overflow::saturate;
  return p;
}

struct Call {
  std::vector<float> c;
  MatmulTelemetry tel;
};

Call run(const MatmulPolicy& p, const MatViewF& a, const MatViewF& b, bool telemetry, bool count) {
  MatmulWorkspace ws;
  MatmulContext ctx;
  ctx.workspace = &ws;
  ctx.telemetry = telemetry;
  ctx.count_swamping = count;
  Call out;
  out.c.assign(a.rows * b.cols, 7.0f);
  out.tel = matmul(a, b, out.c.data(), b.cols, p, ctx);
  return out;
}

// What the telemetry-off call must still match.
void check_same_products(const Call& on, const Call& off, bool count) {
  CHECK(same_bits(on.c, off.c));
  CHECK(on.tel.fast_path == off.tel.fast_path);
  CHECK(std::string(on.tel.route) == off.tel.route);
  CHECK(on.tel.a.elements == off.tel.a.elements);
  CHECK(on.tel.a.nonfinite == off.tel.a.nonfinite);
  CHECK(on.tel.b.nonfinite == off.tel.b.nonfinite);
  if (count) {
    CHECK(on.tel.inner_adds == off.tel.inner_adds);
    CHECK(on.tel.inner_swamped == off.tel.inner_swamped);
  }
}

// Subnormal fp32 values of a stored block (what the in-place scan counts with telemetry).
uint64_t subnormals(const std::vector<float>& v) {
  uint64_t n = 0;
  for (float x : v) n += x != 0 && std::fabs(x) < std::numeric_limits<float>::min();
  return n;
}

}  // namespace

TEST_CASE("matmul without telemetry: the same C, route and swamping counts; MX operands by rows and k-major") {
  for (const char* name : {"fp32", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1"}) {
    const MatmulPolicy p = policy_of(name);
    for (const bool count : {false, true}) {
      // (m, k, n): one MX block, several, and a weight gradient's long K; A as rows and stored K x M,
      // B stored K x N and N x K.
      for (const std::array<size_t, 3>& shape : {std::array<size_t, 3>{64, 32, 64}, {37, 96, 50}, {24, 1056, 40}})
        for (const bool ta : {false, true})
          for (const bool tb : {false, true}) {
            const size_t m = shape[0], k = shape[1], n = shape[2];
            CAPTURE(std::string(name));
            CAPTURE(count);
            CAPTURE(m);
            CAPTURE(k);
            CAPTURE(ta);
            CAPTURE(tb);
            // fp32 with swamping counts: no tiny values, so that the counting kernel takes the call
            // (it reads the operands' smallest magnitudes, which the scan still finds then).
            const bool fp32 = std::strcmp(name, "fp32") == 0, tiny = !(fp32 && count);
            const std::vector<float> a = ta ? values(k, m, m, 1, tiny) : values(m, k, k, 1, tiny);
            const std::vector<float> b = tb ? values(n, k, k, 2, tiny) : values(k, n, n, 2, tiny);
            const MatViewF av{a.data(), m, k, ta ? m : k, ta}, bv{b.data(), k, n, tb ? k : n, tb};
            const Call on = run(p, av, bv, true, count), off = run(p, av, bv, false, count);
            check_same_products(on, off, count);
            if (!tiny) CHECK(on.tel.fast_path);
            if (fp32) {  // the full scan's count, from the values themselves
              CHECK(on.tel.a.subnormal == subnormals(a));
              CHECK(on.tel.b.subnormal == subnormals(b));
              CHECK(on.tel.a.amax > 0);
            } else {
              CHECK(on.tel.a.scale_count > 0);  // (the tallies the off call may leave out)
            }
          }
    }
  }
}

TEST_CASE("matmul without telemetry: a NaN or an inf still sends the call to the reference, the same C") {
  // (n 64: B read where it lies, whole strips; n 48: B packed; A as rows and stored K x M.)
  for (const char* name : {"fp32", "fp8_e4m3"}) {
    const MatmulPolicy p = policy_of(name);
    const size_t m = 40, k = 64;
    for (const size_t n : {size_t{48}, size_t{64}})
      for (const bool ta : {false, true})
        for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
          for (const bool in_a : {false, true}) {
            CAPTURE(std::string(name));
            CAPTURE(n);
            CAPTURE(ta);
            CAPTURE(in_a);
            std::vector<float> a = ta ? values(k, m, m, 3, false) : values(m, k, k, 3, false);
            std::vector<float> b = values(k, n, n, 4, false);
            (in_a ? a[17 * (ta ? m : k) + 5] : b[9 * n + 30]) = bad;
            const MatViewF av{a.data(), m, k, ta ? m : k, ta}, bv{b.data(), k, n, n, false};
            const Call on = run(p, av, bv, true, false), off = run(p, av, bv, false, false);
            check_same_products(on, off, false);
            CHECK(!on.tel.fast_path);
            CHECK((on.tel.a.nonfinite + on.tel.b.nonfinite) == 1);
          }
  }
}

// The one-pass MX kernels themselves: values, scales and block fates the same, counts left zero.
TEST_CASE("mx_cast_blocks and mx_cast_band without a tally: the same values, scales and fates") {
  const SpanCast cast = prepare_span_cast(*find_format("fp8_e4m3"), RoundSpec{});
  const size_t b = 32, nblocks = 24, h = 32, n = 40;
  REQUIRE(mx_cast_applies(cast, b));
  std::vector<float> in = values(1, nblocks * b, nblocks * b, 5);
  in[3 * b + 7] = std::numeric_limits<float>::infinity();  // block 3: not written, left to the caller
  std::vector<float> out_on(in.size(), 1.0f), out_off(in.size(), 1.0f);
  std::vector<double> s_on(nblocks, 3.0), s_off(nblocks, 3.0);
  std::vector<uint8_t> st_on(nblocks, 9), st_off(nblocks, 9);
  MxCastTally t_on, t_off;
  const int shift = 8 - 0;  // e4m3's emax (8), offset 0
  mx_cast_blocks(cast, in.data(), out_on.data(), nblocks, b, shift, s_on.data(), st_on.data(), &t_on, true);
  mx_cast_blocks(cast, in.data(), out_off.data(), nblocks, b, shift, s_off.data(), st_off.data(), &t_off, false);
  CHECK(same_bits(out_on, out_off));
  CHECK(s_on == s_off);
  CHECK(st_on == st_off);
  CHECK(st_on[3] == kMxNonFinite);
  CHECK(t_on.nonfinite == 1);
  CHECK(t_off.nonfinite == 1);
  CHECK(t_on.scales > 0);
  CHECK(t_off.scales == 0);
  CHECK(t_off.cast.flushed == 0);
  CHECK(t_off.cast.subnormal == 0);

  std::vector<float> band = values(h, n, n + 3, 6);
  for (float& x : band)  // (no value tiny enough that scaling it down could round: the band takes it all)
    if (std::fabs(x) < 0x1p-100f) x = 1.0f;
  std::vector<float> band_on(h * n, 1.0f), band_off(h * n, 1.0f);
  std::vector<double> bs_on(n, 3.0), bs_off(n, 3.0);
  MxCastTally u_on, u_off;
  const bool ok_on = mx_cast_band(cast, band.data(), n + 3, h, n, shift, band_on.data(), bs_on.data(), 1, &u_on, true);
  const bool ok_off = mx_cast_band(cast, band.data(), n + 3, h, n, shift, band_off.data(), bs_off.data(), 1, &u_off, false);
  REQUIRE(ok_on);
  REQUIRE(ok_off);
  CHECK(same_bits(band_on, band_off));
  CHECK(bs_on == bs_off);
  CHECK(u_on.scales == n);
  CHECK(u_off.scales == 0);
}

}  // namespace test_matmul_telemetry_off
