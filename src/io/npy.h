// Arrays on disk: NumPy .npy files (format 1.0 and 2.0; little-endian float32/float64, C order,
// 1-D or 2-D) and plain text matrices (whitespace-separated numbers, one row per line).
// Every error names the file and what was found. Writes are atomic: a temporary file in the same
// directory, renamed over the target once complete, so a failure never leaves half an output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "io/io_error.h"

namespace drift::io {

enum class Dtype { f4, f8 };

// A C-order array of doubles with 1 or 2 dimensions.
struct Array {
  std::vector<size_t> shape;
  std::vector<double> data;
  size_t rows() const { return shape.size() == 2 ? shape[0] : 1; }
  size_t cols() const { return shape.empty() ? 0 : shape.back(); }
};

Array read_npy(const std::string& path);
// The same from the file's bytes; `path` names it in errors.
Array parse_npy(const std::string& bytes, const std::string& path);
// Text matrix: '#' starts a comment line, blank lines are skipped; every row must have the same
// count of numbers. Always 2-D (rows x cols).
Array read_text_matrix(const std::string& path);
// .npy when the name ends in ".npy", else a text matrix.
Array read_array(const std::string& path);

// Writes the array as .npy (format 1.0, or 2.0 when the header needs it) in the given dtype.
// float32 output rounds each double to nearest-even float (values already on the fp32 grid are exact).
void write_npy(const std::string& path, const Array& a, Dtype dtype);
// Dumps for other programs (NumPy, PyTorch): a C-order array of any rank >= 1 straight from typed
// memory, little-endian float32 ('<f4') or int32 ('<i4'), bytes copied exactly. Atomic like write_npy.
void write_npy_f32(const std::string& path, const std::vector<size_t>& shape, const float* data);
void write_npy_i32(const std::string& path, const std::vector<size_t>& shape, const int32_t* data);
// Text: one row per line, shortest round-trip decimals.
void write_text_matrix(const std::string& path, const Array& a);
// .npy when the name ends in ".npy", else text (dtype then ignored).
void write_array(const std::string& path, const Array& a, Dtype dtype);

// Writes `bytes` to `path` atomically (temporary file + rename).
void write_file_atomic(const std::string& path, const std::string& bytes);
// The same with the file's bytes given as pieces, written in order (a large body written from where
// it lies rather than copied behind its header first).
void write_file_atomic(const std::string& path, std::initializer_list<std::string_view> pieces);

}  // namespace drift::io
