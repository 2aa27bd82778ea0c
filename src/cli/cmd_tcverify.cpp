// drift tcverify DIR --preset P: replays measured tensor-core vectors (the data/tensorcore layout)
// through a preset and reports, per result file, how many cases the model reproduces bit for bit.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "arith/catalogue.h"
#include "arith/tcverify.h"
#include "cli/commands.h"

namespace drift::cli {
namespace {

struct TcVerifyCliOptions {
  std::string dir;
  std::string preset;
  std::string output;  // "" (the preset's), fp32, fp16, all
  std::string c = "file";
  bool json = false;
  bool list = false;
  size_t show = 5;
};

void list_presets(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : tc_presets()) {
      const FusedModel& m = p.model;
      out.push_back({{"name", p.name}, {"aliases", p.aliases}, {"gpu", p.gpu}, {"input", p.input},
                     {"output", p.output}, {"terms", m.terms}, {"neab", p.neab}, {"kept_bits", m.kept_bits},
                     {"out_man_bits", m.out_man_bits}, {"final_rounding", to_string(m.final_rounding)},
                     {"sticky", m.sticky}, {"align_includes_acc", m.align_includes_acc},
                     {"min_align_exp", m.min_align_exp == kNoMinAlignExp ? nlohmann::json(nullptr)
                                                                         : nlohmann::json(m.min_align_exp)},
                     {"promote_every", m.promote_every}, {"interleave", m.interleave}, {"source", p.source}, {"doc", p.doc},
                     {"validated", p.validated}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  for (const auto& p : tc_presets()) {
    std::printf("%-26s %s\n", p.name.c_str(), p.doc.c_str());
    std::printf("%-26s source: %s%s%s\n", "", p.source.c_str(), p.validated.empty() ? "" : "; validated: ",
                p.validated.c_str());
  }
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

void run_tcverify(const TcVerifyCliOptions& o) {
  if (o.list) {
    list_presets(o.json);
    return;
  }
  if (o.dir.empty()) throw InputError("tcverify: DIR is required (or --list)");
  if (o.preset.empty()) throw InputError("tcverify: --preset is required (see `drift tcverify --list`)");
  auto preset = find_tc_preset(o.preset);
  if (!preset) throw InputError("--preset: unknown preset '" + o.preset + "' (see `drift tcverify --list`)");
  if (o.c != "file" && o.c != "zero") throw InputError("--c: expected file or zero, got '" + o.c + "'");

  std::vector<TcPreset> runs;
  std::vector<std::string> outputs;
  try {
    if (o.output == "all") outputs = tc_outputs_present(o.dir);
    else outputs.push_back(o.output.empty() ? preset->output : o.output);
  } catch (const TcDataError& e) {
    throw InputError(e.what());
  }
  if (outputs.empty()) throw InputError(o.dir + ": no d_*_fp32.txt or d_*_fp16.txt file");
  for (const auto& out : outputs) {
    if (out != "fp32" && out != "fp16") throw InputError("--output: expected fp32, fp16 or all, got '" + out + "'");
    auto p = tc_preset_with_output(*preset, out);
    if (!p)
      throw InputError("--output " + out + ": preset " + preset->name + " (" + preset->gpu + ", " + preset->input +
                       ") has no " + out + "-output variant");
    runs.push_back(*p);
  }

  TcVerifyOptions vo;
  vo.c_zero = o.c == "zero";
  vo.max_mismatches = o.show;
  std::vector<TcFileResult> results;
  try {
    for (const auto& p : runs) results.push_back(tc_verify(o.dir, p, vo));
  } catch (const TcDataError& e) {
    throw InputError(e.what());
  }

  bool all = true;
  for (const auto& r : results) all = all && r.matched == r.total;
  if (o.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json mm = nlohmann::json::array();
      for (const auto& m : r.first_mismatches)
        mm.push_back({{"line", m.line}, {"gpu", hex32(m.expected)}, {"model", hex32(m.got)}});
      files.push_back({{"file", r.file}, {"output", r.output}, {"preset", r.preset}, {"matched", r.matched},
                       {"total", r.total}, {"first_mismatches", mm}});
    }
    nlohmann::json out = {{"dir", o.dir}, {"c", o.c}, {"files", files}, {"all_match", all}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    for (const auto& r : results) {
      std::printf("%-40s %-26s %5zu/%-5zu %s\n", r.file.c_str(), r.preset.c_str(), r.matched, r.total,
                  r.matched == r.total ? "ok" : "MISMATCH");
      for (const auto& m : r.first_mismatches)
        std::printf("  line %zu: gpu %s  model %s\n", m.line, hex32(m.expected).c_str(), hex32(m.got).c_str());
    }
    if (!all && o.c == "file" && (preset->input == "fp8_e4m3" || preset->input == "fp8_e5m2"))
      std::printf("note: the H100 FP8 fp32-output vectors shipped with drift were measured with c = 0 "
                  "(WGMMA); replay them with --c zero\n");
  }
  std::fflush(stdout);
  if (!all) std::exit(kExitFailure);
}

}  // namespace

void add_tcverify_command(CLI::App& app) {
  auto o = std::make_shared<TcVerifyCliOptions>();
  auto* cmd = app.add_subcommand(
      "tcverify",
      "Replay measured tensor-core vectors (a_*.txt, b_*.txt, c_*_fp32.txt, d_*_fp32|fp16.txt) through a "
      "hardware accumulation preset; exit 0 if every case matches bit for bit, 1 if not, 2 for bad input");
  cmd->add_option("DIR", o->dir, "Directory with the vectors (e.g. data/tensorcore/H100/fp16)");
  cmd->add_option("--preset", o->preset, "Preset name (see --list)");
  cmd->add_option("--output", o->output,
                  "fp32 | fp16 | all: which d_* file to check (default: the preset's output format; another "
                  "format picks the same GPU's preset for it)");
  cmd->add_option("--c", o->c, "file (c from c_*_fp32.txt, rounded to the output format) | zero")
      ->capture_default_str();
  cmd->add_option("--show", o->show, "Mismatches to print per file")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--list", o->list, "List the presets with their parameters and sources");
  cmd->callback([o] { run_tcverify(*o); });
}

}  // namespace drift::cli
