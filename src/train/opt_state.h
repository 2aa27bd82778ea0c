// Storage of an optimizer state vector (momentum, second moment) in a chosen format:
//   fp32        as computed;
//   bf16        each value rounded to bf16 (rne) when stored;
//   int8_block  8-bit block-wise dynamic quantization, as 8-bit optimizers do (Dettmers et al.,
//               "8-bit Optimizers via Block-wise Quantization", 2022): each block of kBlock
//               consecutive elements of one tensor is divided by its absolute maximum (kept in
//               fp32) and stored as the index of the nearest value of a 256-entry dynamic map
//               (signed for the momentum, unsigned for the second moment; see dynamic_map).
// The optimizer works block by block. fp32 and bf16 blocks are updated where they are stored
// (update_begin gives the stored floats; update_end rounds bf16 ones in place); int8_block ones are
// decoded into a scratch block and quantized back.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/params.h"
#include "train/blob.h"

namespace drift {

enum class StateFormat : uint8_t { fp32, bf16, int8_block };
bool parse_state_format(const std::string& s, StateFormat* out);
const char* to_string(StateFormat f);

// The 256 code values of the dynamic data type, ascending, in [-1, 1] (signed) or [0, 1]
// (unsigned): for each decade i = 0..6, 2^i (signed) or 2^(i+1) (unsigned) values
// 10^(i-6) * (midpoints of a linear grid over [0.1, 1]), mirrored for the sign, plus 0 and 1.
// (The construction of bitsandbytes' create_dynamic_map with 7 exponent bits, computed in double
// and rounded to float.)
const std::array<float, 256>& dynamic_map(bool is_signed);

// The code whose value is nearest to x (x already divided by the block absmax, so in [-1, 1]);
// a tie goes to the smaller code.
uint8_t encode_dynamic(float x, const std::array<float, 256>& map);

class StateBuffer {
 public:
  static constexpr size_t kBlock = 256;
  // One block list per tensor of `table` (blocks never straddle two tensors).
  void init(StateFormat f, const ParamTable& table, bool is_signed);
  // Blocks: [block_begin(b), block_end(b)) of the flat parameter buffer.
  size_t blocks() const { return starts_.size(); }
  size_t block_begin(size_t b) const { return starts_[b]; }
  size_t block_end(size_t b) const { return ends_[b]; }
  void load(size_t b, float* out) const;        // out[0 .. block size)
  void store(size_t b, const float* in);         // rounds/quantizes to the format
  // Block b's values to update in place: the stored floats themselves (fp32, bf16; no copy, and
  // consecutive blocks' floats follow each other), or for int8_block the decoded values in
  // `scratch` (kBlock floats). update_end(b, last, values) then stores blocks b..last (one block
  // for int8_block): nothing for fp32, rne to bf16 in place, quantized for int8_block. The same
  // bits as load, update, store, block by block.
  float* update_begin(size_t b, float* scratch);
  void update_end(size_t b, size_t last, float* values);
  StateFormat format() const { return fmt_; }
  void save(BlobWriter& w) const;
  void restore(BlobReader& r);

 private:
  StateFormat fmt_ = StateFormat::fp32;
  bool signed_ = true;
  std::vector<size_t> starts_, ends_;
  std::vector<float> values_;    // fp32, bf16
  std::vector<uint8_t> codes_;   // int8_block
  std::vector<float> absmax_;    // int8_block, per block
};

}  // namespace drift
