// Reading measured tensor-core vectors (the data/tensorcore layout, see its README.md) into bit
// patterns for arith/tcverify.h, which replays them; this file does no arithmetic. A set's
// directory holds:
//   a_*.txt, b_*.txt   one case per line, K hexadecimal binary32 bit patterns (inputs)
//   c_*_fp32.txt       one 32-character 0/1 string per line (the addend, binary32)
//   d_*_fp32.txt       the GPU's result, binary32 bit string
//   d_*_fp16.txt       the GPU's fp16 result widened to binary32
//   measured.txt       how the set was measured (drift's own file, see tc_read_measured)
// Every error is a TcDataError naming the file and, where it applies, the line.
#pragma once

#include <string>
#include <vector>

#include "arith/tcverify.h"

namespace drift::io {

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

// The set in `dir`: a, b, the d file of `output` (fp32 | fp16) and, with read_c, c. Checks that each
// file exists once, parses, and has as many lines as a (at least one).
TcVectors read_tc_vectors(const std::string& dir, const std::string& output, bool read_c);

// The lines of dir/measured.txt, or an empty vector where the file is absent. Throws TcDataError
// (naming the file and line) for a malformed line, an unknown preset, a preset of another output
// format or an output listed twice.
std::vector<TcMeasured> tc_read_measured(const std::string& dir);

// The directories at or below `root` that hold a measured.txt, sorted by path.
std::vector<std::string> tc_measured_sets(const std::string& root);

// The d_* files present in dir, by output format ("fp32", "fp16"), in that order.
std::vector<std::string> tc_outputs_present(const std::string& dir);

}  // namespace drift::io
