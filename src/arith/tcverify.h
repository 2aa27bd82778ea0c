// Replays measured tensor-core vectors through a preset (host only; reads files). The directory
// layout is the one of data/tensorcore/<GPU>/<fmt>/ (see its README.md):
//   a_*.txt, b_*.txt   one case per line, K hexadecimal binary32 bit patterns (inputs)
//   c_*_fp32.txt       one 32-character 0/1 string per line (the addend, binary32)
//   d_*_fp32.txt       the GPU's result, binary32 bit string
//   d_*_fp16.txt       the GPU's fp16 result widened to binary32
//   measured.txt       how the set was measured (drift's own file, see tc_read_measured)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "arith/tc_presets.h"

namespace drift {

// Missing or malformed files; the message names the file and, where it applies, the line.
struct TcDataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TcMismatch {
  size_t line = 0;        // 1-based line (case) number
  uint32_t expected = 0;  // the GPU's bits (binary32)
  uint32_t got = 0;       // the model's bits (binary32)
};

// One line of a set's measured.txt: which result file, the preset that reproduces it, and how the
// instruction was run. The file is data beside the vectors, so that `drift tcverify DIR` replays
// every shipped set the way it was measured without flags:
//   # comment
//   <output fp32|fp16>  <preset name>  c=<file|zero>
struct TcMeasured {
  std::string output;   // fp32 | fp16: the d_*_<output>.txt file
  std::string preset;   // a preset name (find_tc_preset) whose output format is `output`
  bool c_zero = false;  // the instruction ran with c = 0 (the c file is not the addend used)
};

// The file name of a set's description.
inline constexpr const char* kTcMeasuredFile = "measured.txt";

// The lines of dir/measured.txt, or an empty vector where the file is absent. Throws TcDataError
// (naming the file and line) for a malformed line, an unknown preset, a preset of another output
// format or an output listed twice.
std::vector<TcMeasured> tc_read_measured(const std::string& dir);

// The directories at or below `root` that hold a measured.txt, sorted by path.
std::vector<std::string> tc_measured_sets(const std::string& root);

struct TcFileResult {
  std::string file;    // the d_* file checked (path)
  std::string output;  // fp32 | fp16
  std::string preset;  // the preset that ran
  bool c_zero = false;  // c was taken as zero
  size_t matched = 0;
  size_t total = 0;
  std::vector<TcMismatch> first_mismatches;
};

struct TcVerifyOptions {
  // How c is read: from the c file (rounded to nearest into the output format, as the measuring
  // harness did with __float2half for fp16 output), or zero (the shipped H100 FP8 fp32 vectors were
  // measured with WGMMA and c = 0).
  bool c_zero = false;
  size_t max_mismatches = 5;  // how many mismatches to keep per file
};

// Checks the d file of `preset`'s output format in `dir`. Throws TcDataError for missing or
// malformed files and for inputs that are not values of the preset's input format.
TcFileResult tc_verify(const std::string& dir, const TcPreset& preset, const TcVerifyOptions& opt);

// The d_* files present in dir, by output format ("fp32", "fp16"), in that order.
std::vector<std::string> tc_outputs_present(const std::string& dir);

}  // namespace drift
