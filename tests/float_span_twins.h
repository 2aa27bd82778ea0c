// A float function that drift computes in double and rounds once (tanh_fp32, exp_fp32) comes as a
// scalar twin and a SIMD span on every Highway target; these checks hold the span to the twin, bit
// for bit, on every target this CPU runs: the float results, and the doubles before their rounding
// (which show that every target performs the same double operations; the float results alone would
// reveal a difference, say one fused multiply-add, only at rare inputs near a rounding tie).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hwy/targets.h"

namespace drift::testing {

struct FloatSpanTwins {
  float (*scalar)(float);
  double (*scalar_unrounded)(float);
  void (*span)(const float*, float*, size_t);
  void (*span_unrounded)(const float*, double*, size_t);
  const char* (*target_name)();  // the target the span dispatches to now
  std::vector<int64_t> (*targets)();
  bool (*unrounded_defined)(float);  // the inputs the unrounded value is defined for
};

// Restores the real CPU's targets when a check leaves (also on a failed REQUIRE).
struct TargetMock {
  ~TargetMock() { hwy::SetSupportedTargetsForTest(0); }
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Every input of `in` through the span on every target, in pieces of an odd length (so that every
// target also runs its tail), against the scalar twin; the first difference per target is named.
inline void check_span_on_every_target(const FloatSpanTwins& t, const std::vector<float>& in, const char* what) {
  constexpr size_t kPiece = (size_t{1} << 20) + 3;
  std::vector<float> ref(kPiece), got(kPiece), defined(kPiece);
  std::vector<double> ref_d(kPiece), got_d(kPiece);
  const std::vector<int64_t> targets = t.targets();
  REQUIRE(!targets.empty());
  std::vector<int> failures(targets.size(), 0);
  TargetMock mock;
  for (size_t base = 0; base < in.size(); base += kPiece) {
    const size_t len = std::min(kPiece, in.size() - base);
    for (size_t i = 0; i < len; ++i) {
      const float x = in[base + i];
      ref[i] = t.scalar(x);
      defined[i] = t.unrounded_defined(x) ? x : 0.0f;
      ref_d[i] = t.scalar_unrounded(defined[i]);
    }
    for (size_t ti = 0; ti < targets.size(); ++ti) {
      hwy::SetSupportedTargetsForTest(targets[ti]);
      REQUIRE(std::string(t.target_name()) == hwy::TargetName(targets[ti]));  // the mock took effect
      std::memset(got.data(), 0xAB, len * sizeof(float));
      t.span(in.data() + base, got.data(), len);
      std::memset(got_d.data(), 0xAB, len * sizeof(double));
      t.span_unrounded(defined.data(), got_d.data(), len);
      const bool same_f = std::memcmp(ref.data(), got.data(), len * sizeof(float)) == 0;
      const bool same_d = std::memcmp(ref_d.data(), got_d.data(), len * sizeof(double)) == 0;
      if (!(same_f && same_d) && failures[ti]++ == 0) {
        size_t i = 0;
        while (float_bits(ref[i]) == float_bits(got[i]) && std::memcmp(&ref_d[i], &got_d[i], sizeof(double)) == 0) ++i;
        char buf[300];
        std::snprintf(buf, sizeof buf, "target %s: input %08x (%.9g): scalar %08x (double %a), simd %08x (double %a)",
                      hwy::TargetName(targets[ti]), float_bits(in[base + i]), static_cast<double>(in[base + i]),
                      float_bits(ref[i]), ref_d[i], float_bits(got[i]), got_d[i]);
        FAIL_CHECK(buf);
      }
    }
  }
  std::string names;
  for (size_t ti = 0; ti < targets.size(); ++ti) {
    INFO("target " << std::string(hwy::TargetName(targets[ti])));
    CHECK(failures[ti] == 0);
    names += std::string(names.empty() ? "" : ", ") + hwy::TargetName(targets[ti]);
  }
  MESSAGE(std::string(what) << " checked on " << names << " over " << in.size() << " inputs");
}

// Every length below 40 from every offset below 9 of `in`, in place, against the scalar twin: the
// tails, and the lanes of a vector whose neighbours take another path.
inline void check_span_tails_in_place(const FloatSpanTwins& t, const std::vector<float>& in) {
  TargetMock mock;
  for (int64_t target : t.targets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << std::string(hwy::TargetName(target)));
    for (size_t off = 0; off < 9; ++off)
      for (size_t len = 0; off + len <= in.size() && len < 40; ++len) {
        std::vector<float> got(in.begin() + static_cast<ptrdiff_t>(off), in.begin() + static_cast<ptrdiff_t>(off + len));
        t.span(got.data(), got.data(), len);  // in place
        for (size_t i = 0; i < len; ++i) {
          INFO("off " << off << " len " << len << " i " << i);
          CHECK(float_bits(got[i]) == float_bits(t.scalar(in[off + i])));
        }
      }
  }
}

}  // namespace drift::testing
