#include "io/out_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "io/read_file.h"

namespace drift::io {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& dir, const std::string& why) {
  throw IoError(what + " " + dir + ": " + why);
}

// Can a file be created in the existing directory `d`? (A temporary file, removed at once.)
void probe_write(const std::string& what, const std::string& dir, const fs::path& d) {
  std::string tmpl = (d / ".drift-probe.XXXXXX").string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    fail(what, dir, d == fs::path(dir) ? "cannot write in this directory (" + why + ")"
                                       : "cannot create it in " + d.string() + " (" + why + ")");
  }
  ::close(fd);
  ::unlink(name.data());
}

}  // namespace

void check_output_dir(const std::string& dir, const std::string& what) {
  if (dir.empty()) throw IoError(what + ": expected a directory name, got an empty one");
  // The nearest existing ancestor (the directory itself when it exists) must be a directory.
  fs::path p = fs::path(dir).lexically_normal();
  if (p.has_filename() == false && p.has_parent_path()) p = p.parent_path();  // "a/b/" -> "a/b"
  fs::path existing = p;
  struct stat st {};
  while (true) {
    if (::stat(existing.c_str(), &st) == 0) break;
    if (errno != ENOENT && errno != ENOTDIR) fail(what, dir, std::string("cannot access it (") + std::strerror(errno) + ")");
    const fs::path up = existing.has_parent_path() ? existing.parent_path() : fs::path(".");
    if (up == existing) fail(what, dir, "no existing directory above it");
    existing = up.empty() ? fs::path(".") : up;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (existing == p) fail(what, dir, "is " + (S_ISREG(st.st_mode) ? std::string("a file") : file_kind_words(st.st_mode)) +
                                           ", expected a directory");
    fail(what, dir, existing.string() + " is " + (S_ISREG(st.st_mode) ? std::string("a file") : file_kind_words(st.st_mode)) +
                        ", not a directory: nothing can be created under it");
  }
  // A file created and removed in the nearest existing directory: permissions, read-only and pseudo
  // file systems (/proc) all refuse it. (No directory is probed: a sibling run may be creating the
  // same missing parent at this moment.)
  probe_write(what, dir, existing);
}

void create_output_dir(const std::string& dir, const std::string& what) {
  std::error_code ec;
  // Runs of a sweep create sibling directories under shared parents at once, and a run that fails
  // early removes the empty parents it created: a parent may vanish between two mkdirs. Retry.
  for (int attempt = 0; attempt < 5; ++attempt) {
    fs::create_directories(dir, ec);
    if (!ec) break;
  }
  if (ec) fail(what, dir, "cannot create it (" + ec.message() + ")");
  if (!fs::is_directory(dir, ec)) fail(what, dir, "is not a directory");
}

void check_output_file(const std::string& file, const std::string& what) {
  if (file.empty()) throw IoError(what + ": expected a file name, got an empty one");
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail(what, file, "is a directory, expected a file name");
  const fs::path parent = fs::path(file).parent_path();
  check_output_dir(parent.empty() ? std::string(".") : parent.string(), what);
}

}  // namespace drift::io
