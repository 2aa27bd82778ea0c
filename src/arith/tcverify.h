// Replays measured tensor-core vectors through a preset (host only): each case's a, b and c through
// the preset's fused model, compared with the GPU's result bit for bit. The vectors are read from
// their files (the data/tensorcore layout) by io/tc_vectors.h; this file does no I/O.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "arith/tc_presets.h"

namespace drift {

// Bad vector data: a missing or malformed file (io/tc_vectors.h) or an input off the preset's input
// grid; the message names the file and, where it applies, the line.
struct TcDataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TcMismatch {
  size_t line = 0;        // 1-based line (case) number
  uint32_t expected = 0;  // the GPU's bits (binary32)
  uint32_t got = 0;       // the model's bits (binary32)
};

// One measured set's vectors (read by io/tc_vectors.h): per case, the K binary32 bit patterns of a
// and b, the addend c (empty when c is taken as zero) and the GPU's result d; the file names are for
// the messages (a case is its line in each file).
struct TcVectors {
  std::string a_file, b_file, c_file, d_file;
  std::vector<std::vector<uint32_t>> a, b;
  std::vector<uint32_t> c, d;
};

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

// Replays `v` (its d holds results of `preset`'s output format) through the preset's model. Throws
// TcDataError for an input that is not a value of the preset's input format, and when c is to be
// read from the file but `v` has none.
TcFileResult tc_verify(const TcVectors& v, const TcPreset& preset, const TcVerifyOptions& opt);

}  // namespace drift
