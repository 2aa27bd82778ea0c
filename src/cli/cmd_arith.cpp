// drift arith: one correctly rounded operation per input line, for scripts and for checking the
// rounding core against independent implementations (scripts/oracle.py, TestFloat vectors).
#include <unistd.h>
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/codec.h"
#include "arith/ops.h"
#include "arith/random.h"
#include "io/read_file.h"
#include "cli/commands.h"
#include "cli/format_text.h"

namespace drift::cli {
namespace {

struct ArithOptions {
  std::string op = "add";
  std::string format = "fp32";
  std::string out_format;
  std::string in_format = "fp32";
  std::string rounding = "rne";
  std::string overflow = "saturate";
  std::string subnormals = "keep";
  int sr_bits = 24;
  uint64_t seed = 0;
  bool decimal = false;
  std::string print = "hex";
};

Format require_format(const std::string& name, const char* option) {
  auto f = find_format(name);
  if (!f) throw InputError(std::string(option) + ": unknown format '" + name + "' (see `drift formats`)");
  return *f;
}

int operand_count(const std::string& op) {
  if (op == "cast") return 1;
  if (op == "fma") return 3;
  return 2;
}

// strtod under one rounding direction (glibc's strtod honours the current mode); the mode is restored.
double strtod_directed(const char* s, int mode) {
  const int saved = std::fegetround();
  std::fesetround(mode);
  const double v = std::strtod(s, nullptr);
  std::fesetround(saved);
  return v;
}

// A decimal number rounded once, to nearest even, to `f`. Rounding it to double first and then to
// f would round twice: wrong where the double lands exactly on a midpoint of f that the decimal is
// not on. So: d = strtod (rne). If the decimal is exactly d (the upward and downward parses agree),
// d is the value. Otherwise the decimal lies strictly between d and the adjacent double on the side
// where the other directed parse differs; no value of f and no midpoint of two (they are doubles:
// f has fewer significand bits than double) lies strictly inside that interval, so the decimal
// rounds as d nudged toward that side by less than any gap there: round_to_sum(d, +-tiny), the
// engine's rounding of an exact two-term sum (the nudge only acts through its sticky bit). For fp64
// itself d is already the correctly rounded value, and the nudge leaves it.
// `d` is strtod's (round-to-nearest) parse of `tok`.
double round_decimal(const std::string& tok, double d, const Format& f) {
  RoundSpec nearest;
  nearest.overflow = Overflow::ieee;
  const double up = strtod_directed(tok.c_str(), FE_UPWARD), down = strtod_directed(tok.c_str(), FE_DOWNWARD);
  // (Below 2^-1000 the nudge would not be small against d's ulp; no catalogue format below fp64 has
  // values or midpoints there, and for fp64 d is already right.)
  if (up == down || !std::isfinite(d) || std::fabs(d) < 0x1p-1000) return round_to(d, f, nearest);
  // The exact value is above d when the upward parse is, below it when the downward one is.
  const bool above = up != d;
  const double tiny = std::numeric_limits<double>::denorm_min();
  return round_to_sum(d, above ? tiny : -tiny, f, nearest);
}

// One operand token: a hex bit pattern of `f` (or a decimal number, correctly rounded to f with rne).
double parse_operand(const std::string& tok, const Format& f, bool decimal, size_t line) {
  const std::string where = "line " + std::to_string(line) + ": operand '" + tok + "'";
  if (decimal) {
    char* end = nullptr;
    const double d = std::strtod(tok.c_str(), &end);
    if (end == tok.c_str() || *end != '\0') throw InputError(where + " is not a decimal number");
    return round_decimal(tok, d, f);
  }
  std::string hex = tok;
  if (hex.size() > 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex = hex.substr(2);
  if (hex.empty() || hex.size() > 16 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw InputError(where + " is not a hexadecimal bit pattern");
  const uint64_t code = std::stoull(hex, nullptr, 16);
  if (f.bits < 64 && (code >> f.bits) != 0)
    throw InputError(where + " has more than " + std::to_string(f.bits) + " bits");
  return decode(code, f);
}

// Subnormal operands read as zero under a flush mode.
double flush_input(double v, const Format& f, const RoundSpec& spec) {
  if (flushes(f, spec) && f.kind == Kind::floating && v != 0 && abs_of(v) < f.min_normal) return signed_zero(sign_bit(v));
  return v;
}

std::string render(double v, const Format& f, const std::string& print) {
  if (print == "decimal") return shortest(v);
  uint64_t code;
  if (!encode(v, f, &code)) return is_nan(v) ? "nan" : "unencodable";
  const int digits = (f.bits + 3) / 4;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(code));
  return buf;
}

void run_arith(const ArithOptions& o) {
  const Format in_fmt = require_format(o.op == "cast" ? o.in_format : o.format, o.op == "cast" ? "--in-format" : "--format");
  const Format op_fmt = require_format(o.format, "--format");
  const Format out_fmt = require_format(o.out_format.empty() ? o.format : o.out_format, "--out-format");
  RoundSpec spec;
  auto r = parse_rounding(o.rounding);
  if (!r) throw InputError("--rounding: expected rne|rna|rtz|rup|rdn|rto|sr, got '" + o.rounding + "'");
  spec.mode = *r;
  auto ov = parse_overflow(o.overflow);
  if (!ov) throw InputError("--overflow: expected saturate|ieee, got '" + o.overflow + "'");
  spec.overflow = *ov;
  auto sub = parse_subnormals(o.subnormals);
  if (!sub) throw InputError("--subnormals: expected keep|flush, got '" + o.subnormals + "'");
  spec.subnormals = *sub;
  if (o.sr_bits < 1 || o.sr_bits > 32) throw InputError("--sr-bits: expected 1..32, got " + std::to_string(o.sr_bits));
  spec.sr_bits = o.sr_bits;
  if (o.print != "hex" && o.print != "decimal") throw InputError("--print: expected hex|decimal, got '" + o.print + "'");
  if (o.op == "fma" && !exact_products_in_double(op_fmt))
    throw InputError("--op fma: formats with more than 25 mantissa bits are not supported (exact product needs more than double-double)");

  const int nops = operand_count(o.op);
  std::vector<std::string> out;
  std::string line;
  size_t lineno = 0;
  uint64_t index = 0;
  // All of stdin, bounded: an endless or enormous stream is refused, not buffered without end.
  std::istringstream input(io::read_stream(STDIN_FILENO, "stdin", "drift arith input", io::kMaxArithInputBytes));
  while (std::getline(input, line)) {
    ++lineno;
    std::istringstream fields(line);
    std::vector<std::string> toks;
    std::string t;
    while (static_cast<int>(toks.size()) < nops && fields >> t) toks.push_back(t);
    if (toks.empty()) continue;  // blank lines are skipped
    if (static_cast<int>(toks.size()) < nops)
      throw InputError("line " + std::to_string(lineno) + ": expected " + std::to_string(nops) + " operand(s), got " +
                       std::to_string(toks.size()));
    double v[3];
    for (int i = 0; i < nops; ++i) v[i] = flush_input(parse_operand(toks[i], in_fmt, o.decimal, lineno), in_fmt, spec);
    const uint32_t rnd = random_u32(o.seed, 0, index++);
    double result;
    if (o.op == "add") result = op_add(v[0], v[1], out_fmt, spec, rnd);
    else if (o.op == "sub") result = op_add(v[0], -v[1], out_fmt, spec, rnd);
    else if (o.op == "mul") result = op_mul(v[0], v[1], out_fmt, spec, rnd);
    else if (o.op == "fma") result = op_fma(v[0], v[1], v[2], out_fmt, spec, rnd);
    else result = round_to(v[0], out_fmt, spec, rnd);
    out.push_back(render(result, out_fmt, o.print));
  }
  // Nothing is written until every line has been read and computed: a bad line loses nothing.
  std::string all;
  for (const auto& s : out) {
    all += s;
    all += '\n';
  }
  std::fwrite(all.data(), 1, all.size(), stdout);
}

}  // namespace

void add_arith_command(CLI::App& app) {
  auto o = std::make_shared<ArithOptions>();
  auto* cmd = app.add_subcommand(
      "arith",
      "Apply one correctly rounded operation to each stdin line (operands as hex bit patterns; "
      "fields after the operands are ignored, so TestFloat-style lines can be piped in)");
  cmd->add_option("--op", o->op, "add | sub | mul | fma (a*b+c, one rounding) | cast")
      ->check(CLI::IsMember({"add", "sub", "mul", "fma", "cast"}))
      ->capture_default_str();
  cmd->add_option("--format", o->format, "Format of the operands (and of the result unless --out-format)")
      ->capture_default_str();
  cmd->add_option("--out-format", o->out_format, "Format the exact result is rounded to (default: --format)");
  cmd->add_option("--in-format", o->in_format, "For --op cast: format of the input bit patterns")->capture_default_str();
  cmd->add_option("--rounding", o->rounding, "rne | rna | rtz | rup | rdn | rto | sr")->capture_default_str();
  cmd->add_option("--overflow", o->overflow,
                  "saturate (the default: a result beyond +-max finite, an infinite operand's included, becomes "
                  "+-max) | ieee (overflow to inf, or NaN where the format has no inf: what IEEE 754 and TestFloat expect)")
      ->capture_default_str();
  cmd->add_option("--subnormals", o->subnormals,
                  "keep | flush (subnormal results become signed zero, subnormal operands read as zero)")
      ->capture_default_str();
  cmd->add_option("--sr-bits", o->sr_bits, "Stochastic rounding: random bits added to the discarded bits (1..32)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the counter-based generator (line i uses element i of stream 0)")
      ->check(non_negative_seed())
      ->capture_default_str();
  cmd->add_flag("--decimal", o->decimal, "Operands are decimal numbers (each first correctly rounded to its format with rne)");
  cmd->add_option("--print", o->print, "hex (bit pattern of the result format) | decimal")->capture_default_str();
  cmd->footer(
      "Overflow: the default is saturate, as low-precision training kernels do; TestFloat's expected results assume "
      "--overflow ieee.\nNaN: a NaN result is always the format's canonical NaN: positive and quiet, without payload "
      "(fp64 7ff8000000000000, fp32 7fc00000, bf16 7fc0, tf32 3fe00, fp16 7e00, fp8_e5m2 7e; "
      "fp8_e4m3 7f (S.1111.111, its only NaN); the fnuz formats 80 (the negative-zero pattern); e8m0 ff). A format "
      "without a NaN encoding (fp6, fp4, int8) prints nan.");
  cmd->callback([o] { run_arith(*o); });
}

}  // namespace drift::cli
