#include "io/npy.h"

#include "io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace drift::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes

[[noreturn]] void fail(const std::string& path, const std::string& msg) { throw IoError(path + ": " + msg); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The header is a Python dict literal: {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
struct HeaderParser {
  const std::string& path;
  const std::string& s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  [[noreturn]] void bad(const std::string& what) {
    fail(path, "malformed .npy header (" + what + " at offset " + std::to_string(i) + "): " + s.substr(0, 120));
  }
  void expect(char c) {
    ws();
    if (i >= s.size() || s[i] != c) bad(std::string("expected '") + c + "'");
    ++i;
  }
  bool peek(char c) {
    ws();
    return i < s.size() && s[i] == c;
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad("expected a quoted string");
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) bad("unterminated string");
    return s.substr(start, i++ - start);
  }
  bool word(const char* w) {
    ws();
    const size_t n = std::strlen(w);
    if (s.compare(i, n, w) == 0) {
      i += n;
      return true;
    }
    return false;
  }
  std::vector<uint64_t> tuple() {
    expect('(');
    std::vector<uint64_t> out;
    while (!peek(')')) {
      ws();
      uint64_t v = 0;
      auto r = std::from_chars(s.data() + i, s.data() + s.size(), v);
      if (r.ec != std::errc()) bad("expected a non-negative integer in shape");
      i = static_cast<size_t>(r.ptr - s.data());
      // Python 2 era writers append 'L' to longs.
      if (i < s.size() && s[i] == 'L') ++i;
      out.push_back(v);
      if (peek(',')) ++i;
      else if (!peek(')')) bad("expected ',' or ')' in shape");
    }
    expect(')');
    return out;
  }
};

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string t = "(";
  for (size_t k = 0; k < shape.size(); ++k) t += (k ? ", " : "") + std::to_string(shape[k]);
  if (shape.size() == 1) t += ",";
  return t + ")";
}

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(s[at + k]);
  return v;
}

std::string shortest(double x) {
  if (x != x) return "nan";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

}  // namespace

Array read_npy(const std::string& path) { return parse_npy(read_regular_file(path, ".npy file", kMaxDataBytes), path); }

Array parse_npy(const std::string& bytes, const std::string& path) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    fail(path, "not a .npy file (missing the \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2) {
    if (bytes.size() < 12) fail(path, "truncated .npy header");
    header_len = le32(bytes, 8);
    header_start = 12;
  } else {
    fail(path, ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " is not supported (expected 1.0 or 2.0)");
  }
  if (header_start + header_len > bytes.size())
    fail(path, "truncated .npy header (header says " + std::to_string(header_len) + " bytes, file has " +
                   std::to_string(bytes.size() - header_start) + ")");
  const std::string header = bytes.substr(header_start, header_len);

  HeaderParser p{path, header};
  std::string descr;
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::vector<uint64_t> shape;
  p.expect('{');
  while (!p.peek('}')) {
    const std::string key = p.str();
    p.expect(':');
    if (key == "descr") {
      if (p.peek('[')) fail(path, "structured dtypes are not supported (expected float32 or float64)");
      descr = p.str();
      have_descr = true;
    } else if (key == "fortran_order") {
      if (p.word("True")) fortran = true;
      else if (p.word("False")) fortran = false;
      else p.bad("expected True or False for fortran_order");
      have_order = true;
    } else if (key == "shape") {
      shape = p.tuple();
      have_shape = true;
    } else {
      fail(path, "unexpected key '" + key + "' in .npy header");
    }
    if (p.peek(',')) ++p.i;
    else if (!p.peek('}')) p.bad("expected ',' or '}'");
  }
  if (!have_descr || !have_order || !have_shape)
    fail(path, "malformed .npy header (needs descr, fortran_order and shape): " + header.substr(0, 120));

  size_t item;
  if (descr == "<f4") item = 4;
  else if (descr == "<f8") item = 8;
  else if (descr == ">f4" || descr == ">f8")
    fail(path, "dtype '" + descr + "' is big-endian, which is not supported (expected '<f4' or '<f8')");
  else
    fail(path, "dtype '" + descr + "' is not supported (expected float32 or float64: '<f4' or '<f8')");
  if (fortran) fail(path, "fortran_order True is not supported (expected a C-order array; use np.ascontiguousarray)");
  if (shape.empty() || shape.size() > 2)
    fail(path, std::to_string(shape.size()) + "-D shape " + shape_text(shape) + " is not supported (expected 1-D or 2-D)");

  uint64_t count = 1;
  for (uint64_t d : shape) {
    if (d != 0 && count > (uint64_t{1} << 40) / d) fail(path, "shape " + shape_text(shape) + " is too large");
    count *= d;
  }
  const size_t data_start = header_start + header_len;
  const uint64_t need = count * item;
  const uint64_t have = bytes.size() - data_start;
  if (have < need)
    fail(path, "truncated: shape " + shape_text(shape) + " of " + (item == 4 ? "float32" : "float64") + " needs " +
                   std::to_string(need) + " bytes of data, the file has " + std::to_string(have));
  if (have > need)
    fail(path, std::to_string(have - need) + " unexpected bytes after the data of shape " + shape_text(shape));

  Array a;
  for (uint64_t d : shape) a.shape.push_back(static_cast<size_t>(d));
  a.data.resize(count);
  const char* src = bytes.data() + data_start;
  for (uint64_t k = 0; k < count; ++k) {
    if (item == 4) {
      float f;
      std::memcpy(&f, src + 4 * k, 4);
      a.data[k] = f;
    } else {
      std::memcpy(&a.data[k], src + 8 * k, 8);
    }
  }
  return a;
}

Array read_text_matrix(const std::string& path) {
  const std::string text = read_regular_file(path, "text matrix", kMaxTextInputBytes);
  std::istringstream in(text);
  std::string line;
  size_t lineno = 0, cols = 0, rows = 0, first_line = 0;
  Array a;
  while (std::getline(in, line)) {
    ++lineno;
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    std::istringstream fields(line);
    std::string tok;
    size_t n = 0;
    while (fields >> tok) {
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(tok.c_str(), &end);
      if (end == tok.c_str() || *end != '\0')
        fail(path, "line " + std::to_string(lineno) + ": '" + tok + "' is not a number");
      a.data.push_back(v);
      ++n;
    }
    if (rows == 0) {
      cols = n;
      first_line = lineno;
    } else if (n != cols) {
      fail(path, "line " + std::to_string(lineno) + " has " + std::to_string(n) + " numbers, expected " +
                     std::to_string(cols) + " (as on line " + std::to_string(first_line) + ")");
    }
    ++rows;
  }
  if (rows == 0) fail(path, "no numbers found (expected a text matrix: one row of numbers per line)");
  a.shape = {rows, cols};
  return a;
}

Array read_array(const std::string& path) { return ends_with(path, ".npy") ? read_npy(path) : read_text_matrix(path); }

void write_file_atomic(const std::string& path, const std::string& bytes) { write_file_atomic(path, {std::string_view(bytes)}); }

void write_file_atomic(const std::string& path, std::initializer_list<std::string_view> pieces) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) fail(path, "not a file name");
  std::string tmpl = dir + "/." + base + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = mkstemp(name.data());
  if (fd < 0) fail(path, std::string("cannot create a file in '") + dir + "' (" + std::strerror(errno) + ")");
  const std::string tmp(name.data());
  auto abandon = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, what + " (" + reason + ")");
  };
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) abandon("cannot set permissions");
  for (const std::string_view bytes : pieces) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        abandon("write failed");
      }
      off += static_cast<size_t>(w);
    }
  }
  if (::fsync(fd) != 0) abandon("fsync failed");
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail(path, "close failed (" + reason + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail(path, "cannot rename the finished file into place (" + reason + ")");
  }
}

namespace {

// Magic, version and the padded header dict of a C-order array: format 1.0, or 2.0 when the header
// is too long for 1.0's 16-bit length. The data that follows starts at a multiple of 64 bytes.
std::string npy_prefix(const char* descr, const std::vector<size_t>& shape) {
  const std::vector<uint64_t> dims(shape.begin(), shape.end());
  const std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape_text(dims) + ", }";
  auto padded = [&](size_t prefix) {
    std::string h = dict;
    const size_t total = prefix + h.size() + 1;
    h.append((64 - total % 64) % 64, ' ');
    h += '\n';
    return h;
  };
  std::string out(kMagic, 6);
  std::string h = padded(10);
  if (h.size() <= 0xffff) {
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(h.size() & 0xff);
    out += static_cast<char>(h.size() >> 8);
  } else {
    h = padded(12);
    out += '\x02';
    out += '\x00';
    for (int k = 0; k < 4; ++k) out += static_cast<char>((h.size() >> (8 * k)) & 0xff);
  }
  return out + h;
}

size_t element_count(const std::string& path, const std::vector<size_t>& shape) {
  if (shape.empty()) fail(path, "internal error: an array needs at least one dimension");
  size_t count = 1;
  for (size_t d : shape) count *= d;
  return count;
}

// The data bytes are the host's: drift only builds on little-endian machines (as '<f4'/'<i4' say).
static_assert(std::endian::native == std::endian::little, "npy output assumes a little-endian host");

template <typename T>
void write_typed(const std::string& path, const char* descr, const std::vector<size_t>& shape, const T* data) {
  const size_t count = element_count(path, shape);
  const std::string prefix = npy_prefix(descr, shape);
  write_file_atomic(path, {prefix, std::string_view(reinterpret_cast<const char*>(data), sizeof(T) * count)});
}

}  // namespace

void write_npy(const std::string& path, const Array& a, Dtype dtype) {
  if (a.shape.empty() || a.shape.size() > 2) fail(path, "only 1-D and 2-D arrays can be written");
  if (element_count(path, a.shape) != a.data.size()) fail(path, "internal error: shape does not match the data");
  if (dtype == Dtype::f8) return write_typed(path, "<f8", a.shape, a.data.data());
  std::vector<float> f(a.data.size());
  for (size_t k = 0; k < f.size(); ++k) f[k] = static_cast<float>(a.data[k]);  // rne
  write_typed(path, "<f4", a.shape, f.data());
}

void write_npy_f32(const std::string& path, const std::vector<size_t>& shape, const float* data) {
  write_typed(path, "<f4", shape, data);
}

void write_npy_i32(const std::string& path, const std::vector<size_t>& shape, const int32_t* data) {
  write_typed(path, "<i4", shape, data);
}

void write_text_matrix(const std::string& path, const Array& a) {
  const size_t rows = a.rows(), cols = a.cols();
  std::string out;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      if (c) out += ' ';
      out += shortest(a.data[r * cols + c]);
    }
    out += '\n';
  }
  write_file_atomic(path, out);
}

void write_array(const std::string& path, const Array& a, Dtype dtype) {
  if (ends_with(path, ".npy")) write_npy(path, a, dtype);
  else write_text_matrix(path, a);
}

}  // namespace drift::io
