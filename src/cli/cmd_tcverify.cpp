// drift tcverify DIR [--preset P]: replays measured tensor-core vectors (the data/tensorcore layout)
// through a preset, or through the presets each set's measured.txt names, and reports, per result
// file, how many cases the model reproduces bit for bit.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "arith/catalogue.h"
#include "arith/tcverify.h"
#include "cli/commands.h"
#include "io/tc_vectors.h"

namespace drift::cli {
namespace {

struct TcVerifyCliOptions {
  std::string dir;
  std::string preset;
  std::string output;  // "" (the preset's), fp32, fp16, all
  std::string c;       // "" (as the set's measured.txt says, else file), file, zero
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

// One result file to check: its set's directory, the preset and how c is taken.
struct TcJob {
  std::string dir;
  TcPreset preset;
  bool c_zero = false;
};

bool wanted_output(const TcVerifyCliOptions& o, const std::string& output) {
  return o.output.empty() || o.output == "all" || o.output == output;
}

// Without --preset: every set at or below DIR as its measured.txt describes it.
std::vector<TcJob> jobs_from_measured(const TcVerifyCliOptions& o) {
  std::vector<TcJob> jobs;
  const auto sets = io::tc_measured_sets(o.dir);
  if (sets.empty())
    throw InputError(o.dir + ": no " + io::kTcMeasuredFile + " (how the vectors were measured) here or below; give " +
                     "--preset (see `drift tcverify --list`)");
  for (const auto& set : sets)
    for (const auto& m : io::tc_read_measured(set))
      if (wanted_output(o, m.output))
        jobs.push_back({set, *find_tc_preset(m.preset), o.c.empty() ? m.c_zero : o.c == "zero"});
  if (jobs.empty()) throw InputError("--output " + o.output + ": no set under " + o.dir + " lists that output");
  return jobs;
}

// With --preset: DIR's result files of the preset's GPU and input, c as --c says or else as DIR's
// measured.txt says for that output (else from the file).
std::vector<TcJob> jobs_for_preset(const TcVerifyCliOptions& o) {
  auto preset = find_tc_preset(o.preset);
  if (!preset) throw InputError("--preset: unknown preset '" + o.preset + "' (see `drift tcverify --list`)");
  std::vector<std::string> outputs;
  if (o.output == "all") outputs = io::tc_outputs_present(o.dir);
  else outputs.push_back(o.output.empty() ? preset->output : o.output);
  if (outputs.empty()) throw InputError(o.dir + ": no d_*_fp32.txt or d_*_fp16.txt file");
  const auto measured = io::tc_read_measured(o.dir);
  std::vector<TcJob> jobs;
  for (const auto& out : outputs) {
    auto p = tc_preset_with_output(*preset, out);
    if (!p)
      throw InputError("--output " + out + ": preset " + preset->name + " (" + preset->gpu + ", " + preset->input +
                       ") has no " + out + "-output variant");
    bool c_zero = o.c == "zero";
    if (o.c.empty())
      for (const auto& m : measured)
        if (m.output == out) c_zero = m.c_zero;
    jobs.push_back({o.dir, *p, c_zero});
  }
  return jobs;
}

void print_results(const TcVerifyCliOptions& o, const std::vector<TcFileResult>& results, bool all) {
  if (o.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json mm = nlohmann::json::array();
      for (const auto& m : r.first_mismatches)
        mm.push_back({{"line", m.line}, {"gpu", hex32(m.expected)}, {"model", hex32(m.got)}});
      files.push_back({{"file", r.file}, {"output", r.output}, {"preset", r.preset}, {"c", r.c_zero ? "zero" : "file"},
                       {"matched", r.matched}, {"total", r.total}, {"first_mismatches", mm}});
    }
    nlohmann::json out = {{"dir", o.dir}, {"files", files}, {"all_match", all}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  for (const auto& r : results) {
    std::printf("%-40s %-26s c=%-4s %5zu/%-5zu %s\n", r.file.c_str(), r.preset.c_str(), r.c_zero ? "zero" : "file",
                r.matched, r.total, r.matched == r.total ? "ok" : "MISMATCH");
    for (const auto& m : r.first_mismatches)
      std::printf("  line %zu: gpu %s  model %s\n", m.line, hex32(m.expected).c_str(), hex32(m.got).c_str());
  }
}

void run_tcverify(const TcVerifyCliOptions& o) {
  if (o.list) {
    list_presets(o.json);
    return;
  }
  if (o.dir.empty()) throw InputError("tcverify: DIR is required (or --list)");
  if (!o.c.empty() && o.c != "file" && o.c != "zero") throw InputError("--c: expected file or zero, got '" + o.c + "'");
  if (!o.output.empty() && o.output != "fp32" && o.output != "fp16" && o.output != "all")
    throw InputError("--output: expected fp32, fp16 or all, got '" + o.output + "'");

  TcVerifyOptions vo;
  vo.max_mismatches = o.show;
  std::vector<TcFileResult> results;
  try {
    const auto jobs = o.preset.empty() ? jobs_from_measured(o) : jobs_for_preset(o);
    for (const auto& j : jobs) {
      vo.c_zero = j.c_zero;
      results.push_back(tc_verify(io::read_tc_vectors(j.dir, j.preset.output, !j.c_zero), j.preset, vo));
    }
  } catch (const TcDataError& e) {
    throw InputError(e.what());
  }

  bool all = true;
  for (const auto& r : results) all = all && r.matched == r.total;
  print_results(o, results, all);
  if (!all && !o.json && o.c.empty() && !o.preset.empty() && io::tc_read_measured(o.dir).empty())
    std::printf("note: %s has no %s saying how the vectors were measured; H100 and H200 FP8 fp32-output vectors "
                "are measured with c = 0 (WGMMA): try --c zero\n", o.dir.c_str(), io::kTcMeasuredFile);
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
  cmd->add_option("DIR", o->dir,
                  "Directory with the vectors (e.g. data/tensorcore/H100/fp16). Without --preset: every set at or "
                  "below DIR replayed as its measured.txt says (e.g. data/tensorcore: all shipped sets)");
  cmd->add_option("--preset", o->preset, "Preset name (see --list); default: the ones in measured.txt");
  cmd->add_option("--output", o->output,
                  "fp32 | fp16 | all: which d_* file to check (default with --preset: the preset's output format; "
                  "another format picks the same GPU's preset for it; without --preset: every listed one)");
  cmd->add_option("--c", o->c,
                  "file (c from c_*_fp32.txt, rounded to the output format) | zero (default: as measured.txt "
                  "says for the file, else file)");
  cmd->add_option("--show", o->show, "Mismatches to print per file")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--list", o->list, "List the presets with their parameters and sources");
  cmd->callback([o] { run_tcverify(*o); });
}

}  // namespace drift::cli
