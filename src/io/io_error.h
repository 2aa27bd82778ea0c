// The error of the io layer: a bad or unreadable input file, or a failed write; the message starts
// with the file name. The command line reports it and exits 2 (DESIGN.md, "Errors").
#pragma once

#include <stdexcept>

namespace drift::io {

struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace drift::io
