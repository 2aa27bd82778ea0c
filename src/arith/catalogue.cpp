#include "arith/catalogue.h"

#include <sstream>

#include "arith/enum_names.h"

namespace drift {
namespace {

Format make(Kind kind, int eb, int mb, int bias, bool inf, NanCode nan, bool sub) {
  Format f;
  f.kind = kind;
  f.exp_bits = eb;
  f.man_bits = mb;
  f.bias = bias;
  f.inf = inf;
  f.nan = nan;
  f.subnormals = sub;
  derive_format(f);
  return f;
}

constexpr Kind F = Kind::floating;

std::vector<NamedFormat> build_catalogue() {
  using N = NanCode;
  return {
      {"fp64", "f64 float64 double", "IEEE 754 binary64", make(F, 11, 52, 1023, true, N::ieee, true)},
      {"fp32", "f32 float32 float", "IEEE 754 binary32", make(F, 8, 23, 127, true, N::ieee, true)},
      {"tf32", "e8m10", "NVIDIA TensorFloat-32: fp32 range, 10 mantissa bits", make(F, 8, 10, 127, true, N::ieee, true)},
      {"bf16", "bfloat16 e8m7", "bfloat16: fp32 range, 7 mantissa bits", make(F, 8, 7, 127, true, N::ieee, true)},
      {"fp16", "f16 float16 half e5m10", "IEEE 754 binary16", make(F, 5, 10, 15, true, N::ieee, true)},
      {"fp8_e5m2", "e5m2", "OCP FP8 E5M2: IEEE-like, inf and NaN, max 57344", make(F, 5, 2, 15, true, N::ieee, true)},
      {"fp8_e4m3", "e4m3 e4m3fn", "OCP FP8 E4M3: no inf, NaN only at S.1111.111, max 448", make(F, 4, 3, 7, false, N::ones, true)},
      {"fp8_e4m3fnuz", "e4m3fnuz", "E4M3 fnuz (AMD/Graphcore): bias 8, NaN = 0x80, no -0, max 240", make(F, 4, 3, 8, false, N::negzero, true)},
      {"fp8_e5m2fnuz", "e5m2fnuz", "E5M2 fnuz (AMD/Graphcore): bias 16, NaN = 0x80, no -0, max 57344", make(F, 5, 2, 16, false, N::negzero, true)},
      {"fp6_e3m2", "e3m2", "OCP MX FP6 E3M2: no inf/NaN, max 28", make(F, 3, 2, 3, false, N::none, true)},
      {"fp6_e2m3", "e2m3", "OCP MX FP6 E2M3: no inf/NaN, max 7.5", make(F, 2, 3, 1, false, N::none, true)},
      {"fp4_e2m1", "e2m1 fp4", "OCP MX FP4 E2M1: no inf/NaN, max 6", make(F, 2, 1, 1, false, N::none, true)},
      {"e8m0", "ue8m0", "OCP MX scale: unsigned power of two 2^-127..2^127, NaN 0xFF, no zero",
       make(Kind::pow2, 8, 0, 127, false, N::ones, false)},
      {"int8", "i8", "two's complement integers, symmetric grid -127..127", make(Kind::integer, 0, 7, 0, false, N::none, false)},
  };
}

}  // namespace

bool has_word(std::string_view list, std::string_view word) {
  std::istringstream in{std::string(list)};
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

const std::vector<NamedFormat>& format_catalogue() {
  static const std::vector<NamedFormat> catalogue = build_catalogue();
  return catalogue;
}

std::optional<Format> find_format(std::string_view name) {
  for (const auto& nf : format_catalogue())
    if (name == nf.name || has_word(nf.aliases, name)) return nf.format;
  return std::nullopt;
}

std::string format_name(const Format& f) {
  for (const auto& nf : format_catalogue()) {
    const Format& c = nf.format;
    if (c.kind == f.kind && c.exp_bits == f.exp_bits && c.man_bits == f.man_bits && c.bias == f.bias &&
        c.inf == f.inf && c.nan == f.nan && c.subnormals == f.subnormals)
      return nf.name;
  }
  return "custom";
}

std::optional<Format> make_float_format(int exp_bits, int man_bits, std::optional<int> bias, bool inf,
                                        NanCode nan, bool subnormals, std::string* error) {
  auto fail = [&](const std::string& msg) -> std::optional<Format> {
    *error = msg;
    return std::nullopt;
  };
  if (exp_bits < 1 || exp_bits > 11)
    return fail("exp_bits must be between 1 and 11 (got " + std::to_string(exp_bits) + ")");
  if (man_bits < 0 || man_bits > 52)
    return fail("man_bits must be between 0 and 52 (got " + std::to_string(man_bits) + ")");
  if (inf && nan != NanCode::ieee)
    return fail("inf requires nan \"ieee\" (infinities live at exponent all ones, mantissa zero)");
  if (nan == NanCode::ieee && !inf)
    return fail("nan \"ieee\" requires inf true (the all-ones exponent is reserved for both)");
  if (nan == NanCode::ieee && man_bits == 0)
    return fail("nan \"ieee\" needs man_bits >= 1 to tell NaN from infinity");
  if (nan == NanCode::ones && man_bits == 0 && exp_bits == 1)
    return fail("nan \"ones\" with exp_bits 1 and man_bits 0 leaves no finite non-zero value");
  const int b = bias.value_or((1 << (exp_bits - 1)) - 1);
  Format f = make(Kind::floating, exp_bits, man_bits, b, inf, nan, subnormals);
  if (f.emax > 1023 || f.emax < f.emin)
    return fail("bias " + std::to_string(b) + " puts the largest exponent at " + std::to_string(f.emax) +
                ", outside what fp64 can hold (emin <= emax <= 1023)");
  if (f.emin < -1022 || f.emin - man_bits < -1074)
    return fail("bias " + std::to_string(b) + " puts the smallest value at 2^" + std::to_string(f.emin - man_bits) +
                ", below fp64's range (2^-1074)");
  return f;
}

namespace {
const char* const kRoundingNames[] = {"rne", "rna", "rtz", "rup", "rdn", "rto", "sr"};
const char* const kOverflowNames[] = {"saturate", "ieee"};
const char* const kSubnormalNames[] = {"keep", "flush"};
const char* const kNanNames[] = {"none", "ieee", "ones", "negzero"};
const char* const kKindNames[] = {"float", "int", "pow2"};
}  // namespace

std::optional<Rounding> parse_rounding(std::string_view s) { return enum_from_name<Rounding>(s, kRoundingNames); }
std::optional<Overflow> parse_overflow(std::string_view s) { return enum_from_name<Overflow>(s, kOverflowNames); }
std::optional<Subnormals> parse_subnormals(std::string_view s) { return enum_from_name<Subnormals>(s, kSubnormalNames); }
std::optional<NanCode> parse_nan_code(std::string_view s) { return enum_from_name<NanCode>(s, kNanNames); }
const char* to_string(Rounding r) { return enum_name(r, kRoundingNames); }
const char* to_string(Overflow o) { return enum_name(o, kOverflowNames); }
const char* to_string(Subnormals s) { return enum_name(s, kSubnormalNames); }
const char* to_string(NanCode n) { return enum_name(n, kNanNames); }
const char* to_string(Kind k) { return enum_name(k, kKindNames); }

}  // namespace drift
