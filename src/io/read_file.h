// The one way drift reads an input file: only a regular file is read (a directory, FIFO, device
// such as /dev/zero or socket is refused before any byte is read, so nothing hangs), and only up
// to a size that makes sense for that kind of file (a config is not a gigabyte). Every error is an
// IoError starting with the file name and saying what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "io/io_error.h"

namespace drift::io {

// Size limits per kind of input, in bytes: far above any real file of that kind, far below what
// would exhaust memory.
inline constexpr uint64_t kMaxJsonBytes = uint64_t{256} << 20;      // configs, summaries, sweep.json, metrics lines
inline constexpr uint64_t kMaxDataBytes = uint64_t{4} << 30;        // training text, .npy arrays, checkpoints
inline constexpr uint64_t kMaxTextInputBytes = uint64_t{256} << 20;  // text matrices
inline constexpr uint64_t kMaxArithInputBytes = uint64_t{64} << 20;  // drift arith's stdin (about 2M lines)

// The whole of `path`. `kind` says what the file is for the messages ("config file", "checkpoint",
// ...). Throws IoError: missing or unreadable, not a regular file, larger than max_bytes.
std::string read_regular_file(const std::string& path, const char* kind, uint64_t max_bytes);
// The same appended to *out (in place: a reader of several files reserves their sum once); returns
// the bytes appended. On an error *out is as it was.
size_t append_regular_file(const std::string& path, const char* kind, uint64_t max_bytes, std::string* out);

// Everything readable from an open descriptor (a pipe, a terminal: stdin) up to max_bytes; more is
// refused (an endless stream such as /dev/zero fails fast instead of filling memory). `name` names
// the stream in errors ("stdin"). Throws IoError.
std::string read_stream(int fd, const std::string& name, const char* kind, uint64_t max_bytes);

// Checks that `path` names a regular file that can be opened for reading (what read_regular_file
// refuses up front), without reading it. Throws IoError.
void check_regular_file(const std::string& path, const char* kind);

// The kind of a non-regular file in words ("a directory", "a FIFO (named pipe)", "a character
// device", ...), for messages; "" for a regular file.
std::string file_kind_words(unsigned st_mode);

}  // namespace drift::io
