// The one check of a directory drift is about to write into (a run directory, a sweep or bisect
// directory, init/): before anything is written, so that "--out" naming a file, a path under a
// file, a read-only place or /proc is an error naming the option and the path, not a library
// exception halfway through a run. Nothing is left behind by the check.
#pragma once

#include <string>

#include "io/io_error.h"

namespace drift::io {

// Checks that `dir` exists as a writable directory or can be created (with its missing parents).
// `what` names the option or key ("--out", "output.dir"). Probes by creating and removing a
// temporary entry, so that permissions, read-only file systems and pseudo file systems are all
// caught. Throws IoError "<what> <dir>: <why>".
void check_output_dir(const std::string& dir, const std::string& what);

// Creates `dir` and its missing parents. Throws IoError "<what> <dir>: cannot create it (<why>)".
void create_output_dir(const std::string& dir, const std::string& what);

// Checks that `file` can be written as an output file: not an existing directory, and its directory
// passes check_output_dir. Throws IoError.
void check_output_file(const std::string& file, const std::string& what);

}  // namespace drift::io
