// drift formats: the catalogue with every derived constant.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "arith/catalogue.h"
#include "cli/commands.h"
#include "cli/format_text.h"

namespace drift::cli {
namespace {

nlohmann::json format_json(const NamedFormat& nf) {
  const Format& f = nf.format;
  return {{"name", nf.name},
          {"aliases", nf.aliases},
          {"description", nf.description},
          {"kind", to_string(f.kind)},
          {"bits", f.bits},
          {"exp_bits", f.exp_bits},
          {"man_bits", f.man_bits},
          {"bias", f.bias},
          {"inf", f.inf},
          {"nan", to_string(f.nan)},
          {"subnormals", f.subnormals},
          {"emin", f.emin},
          {"emax", f.emax},
          {"max_finite", f.max_finite},
          {"min_normal", f.kind == Kind::floating ? f.min_normal : f.min_positive},
          {"min_subnormal", f.kind == Kind::floating && f.subnormals ? f.min_positive : 0.0},
          {"epsilon", f.epsilon},
          {"finite_codes", f.finite_codes}};
}

void run_formats(bool json) {
  const auto& cat = format_catalogue();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& nf : cat) out.push_back(format_json(nf));
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%-13s %4s %3s %3s %5s %-4s %-7s %-4s %-24s %-24s %-24s %-22s %s\n", "name", "bits", "exp", "man",
              "bias", "inf", "nan", "sub", "max_finite", "min_normal", "min_subnormal", "epsilon", "finite_codes");
  for (const auto& nf : cat) {
    const Format& f = nf.format;
    const double min_normal = f.kind == Kind::floating ? f.min_normal : f.min_positive;
    const double min_sub = f.kind == Kind::floating && f.subnormals ? f.min_positive : 0.0;
    std::printf("%-13s %4d %3d %3d %5d %-4s %-7s %-4s %-24s %-24s %-24s %-22s %llu\n", nf.name, f.bits, f.exp_bits,
                f.man_bits, f.bias, f.inf ? "yes" : "no", to_string(f.nan), f.subnormals ? "yes" : "no",
                shortest(f.max_finite).c_str(), shortest(min_normal).c_str(),
                min_sub == 0 ? "-" : shortest(min_sub).c_str(), shortest(f.epsilon).c_str(),
                static_cast<unsigned long long>(f.finite_codes));
  }
}

}  // namespace

void add_formats_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("formats", "List every catalogue number format and its derived constants");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->callback([json] { run_formats(*json); });
}

}  // namespace drift::cli
