#include "arith/tcverify.h"

#include <cstdio>

namespace drift {
namespace {

std::string where(const std::string& path, size_t line) { return path + " line " + std::to_string(line); }

std::string hex8(uint32_t u) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", u);
  return s;
}

// One case of a or b: the values, each checked to lie on the input format's grid.
std::vector<double> input_values(const std::vector<uint32_t>& bits, const std::string& path, size_t line,
                                 const Format& in, const std::string& in_name) {
  std::vector<double> v;
  for (uint32_t u : bits) {
    const double x = static_cast<double>(float_of(u));
    if (!is_nan(x)) {
      RoundSpec exact;
      exact.overflow = Overflow::ieee;
      const double r = round_to(x, in, exact);
      if (bits_of(r) != bits_of(x) && !(x == 0 && r == 0))
        throw TcDataError(where(path, line) + ": value " + hex8(u) + " is not a " + in_name + " value");
    }
    v.push_back(x);
  }
  return v;
}

}  // namespace

TcFileResult tc_verify(const TcVectors& v, const TcPreset& preset, const TcVerifyOptions& opt) {
  const size_t n = v.a.size();
  if (!opt.c_zero && v.c.size() != n) throw TcDataError(v.d_file + ": no addend c read for these vectors");
  TcFileResult res;
  res.file = v.d_file;
  res.output = preset.output;
  res.preset = preset.name;
  res.c_zero = opt.c_zero;
  res.total = n;
  RoundSpec to_out;  // the harness converts c to the output format with round to nearest even
  to_out.overflow = Overflow::ieee;
  for (size_t i = 0; i < n; ++i) {
    const size_t line = i + 1;
    const auto a = input_values(v.a[i], v.a_file, line, preset.in_format, preset.input);
    const auto b = input_values(v.b[i], v.b_file, line, preset.in_format, preset.input);
    double c = 0;
    if (!opt.c_zero) c = round_to(static_cast<double>(float_of(v.c[i])), preset.out_format, to_out);
    const uint32_t expected = v.d[i];
    const double d = fused_dot(c, a.data(), b.data(), static_cast<int>(a.size()), preset.model);
    const uint32_t got = bits_of(static_cast<float>(d));
    const bool both_nan = is_nan(d) && is_nan(static_cast<double>(float_of(expected)));
    if (got == expected || both_nan) {
      ++res.matched;
    } else if (res.first_mismatches.size() < opt.max_mismatches) {
      res.first_mismatches.push_back({line, expected, got});
    }
  }
  return res;
}

}  // namespace drift
