#include "io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace drift::io {

namespace {

std::string size_words(uint64_t n) {
  if (n >= (uint64_t{1} << 30)) return std::to_string(n >> 30) + " GiB";
  if (n >= (uint64_t{1} << 20)) return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

// An open file descriptor, closed on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` for reading, checked to be a regular file. O_NONBLOCK: opening a FIFO with no writer
// would otherwise block forever before fstat could refuse it.
void open_regular(const std::string& path, const char* kind, Fd& f, struct stat& st) {
  if (path.empty()) throw IoError(std::string("(empty name): expected the name of a ") + kind);
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) {
    const int err = errno;
    // A directory opens read-only on Linux; other failures say why (missing, permission, ...).
    throw IoError(path + ": cannot open the " + kind + " (" + std::strerror(err) + ")");
  }
  if (::fstat(f.fd, &st) != 0) throw IoError(path + ": cannot read the " + kind + " (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode))
    throw IoError(path + ": is " + file_kind_words(st.st_mode) + "; expected the " + kind + " as a regular file");
}

}  // namespace

std::string file_kind_words(unsigned st_mode) {
  if (S_ISREG(st_mode)) return "";
  if (S_ISDIR(st_mode)) return "a directory";
  if (S_ISFIFO(st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st_mode)) return "a character device";
  if (S_ISBLK(st_mode)) return "a block device";
  if (S_ISSOCK(st_mode)) return "a socket";
  return "not a regular file";
}

void check_regular_file(const std::string& path, const char* kind) {
  Fd f;
  struct stat st {};
  open_regular(path, kind, f, st);
}

std::string read_regular_file(const std::string& path, const char* kind, uint64_t max_bytes) {
  std::string bytes;
  append_regular_file(path, kind, max_bytes, &bytes);
  return bytes;
}

size_t append_regular_file(const std::string& path, const char* kind, uint64_t max_bytes, std::string* out) {
  Fd f;
  struct stat st {};
  open_regular(path, kind, f, st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    throw IoError(path + ": " + size_words(size) + ", more than the " + size_words(max_bytes) + " a " + kind +
                  " may have");
  const size_t start = out->size();
  out->resize(start + size);
  size_t got = 0;
  try {
    while (got < size) {
      const ssize_t n = ::read(f.fd, out->data() + start + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError(path + ": cannot read the " + kind + " (" + std::strerror(errno) + ")");
      if (n == 0) break;  // shrank while being read: what is there
      got += static_cast<size_t>(n);
    }
  } catch (...) {
    out->resize(start);
    throw;
  }
  out->resize(start + got);
  return got;
}

std::string read_stream(int fd, const std::string& name, const char* kind, uint64_t max_bytes) {
  std::string bytes;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(name + ": cannot read the " + kind + " (" + std::strerror(errno) + ")");
    if (n == 0) return bytes;
    if (bytes.size() + static_cast<uint64_t>(n) > max_bytes)
      throw IoError(name + ": more than the " + size_words(max_bytes) + " a " + kind + " may have");
    bytes.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace drift::io
