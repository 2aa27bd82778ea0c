// The named formats and rounding settings (host side: names, aliases, validation).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arith/round.h"

namespace drift {

struct NamedFormat {
  const char* name;
  const char* aliases;      // space-separated
  const char* description;  // what it is and where it comes from
  Format format;            // derived fields filled
};

// Every catalogue format, in display order.
const std::vector<NamedFormat>& format_catalogue();

// A catalogue format by name or alias (case-sensitive), or nullopt.
std::optional<Format> find_format(std::string_view name);
// The catalogue name of a format equal to f, or "custom".
std::string format_name(const Format& f);

// Builds and validates a custom floating-point format. On error returns nullopt and sets *error to
// a message naming the offending field and the accepted range.
std::optional<Format> make_float_format(int exp_bits, int man_bits, std::optional<int> bias, bool inf,
                                        NanCode nan, bool subnormals, std::string* error);

// True when `word` is one of the space-separated words of `list` (alias lists).
bool has_word(std::string_view list, std::string_view word);

// Names of the enumerations, for parsing and printing.
std::optional<Rounding> parse_rounding(std::string_view s);
std::optional<Overflow> parse_overflow(std::string_view s);
std::optional<Subnormals> parse_subnormals(std::string_view s);
std::optional<NanCode> parse_nan_code(std::string_view s);
const char* to_string(Rounding r);
const char* to_string(Overflow o);
const char* to_string(Subnormals s);
const char* to_string(NanCode n);
const char* to_string(Kind k);

}  // namespace drift
