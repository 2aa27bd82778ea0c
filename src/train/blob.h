// A little-endian binary record for checkpoints: values appended in order by BlobWriter, read back
// in the same order by BlobReader, which checks every length against what is left so that a
// truncated file is an error, never a read past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace drift {

struct BlobError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class BlobWriter {
 public:
  void u64(uint64_t x) { raw(&x, sizeof x); }
  void f64(double x) { raw(&x, sizeof x); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    u64(v.size());
    raw(v.data(), v.size() * sizeof(T));
  }
  // (An empty vector's data() may be null: nothing is appended then.)
  void raw(const void* p, size_t n) {
    if (n) buf_.append(static_cast<const char*>(p), n);
  }
  const std::string& bytes() const { return buf_; }
  // Room for n bytes in all (a writer of a few large vectors: one buffer, not a doubling chain of
  // fresh copies).
  void reserve(size_t n) { buf_.reserve(n); }

 private:
  std::string buf_;
};

class BlobReader {
 public:
  BlobReader(const char* p, size_t n) : p_(p), n_(n) {}
  uint64_t u64() {
    uint64_t x;
    raw(&x, sizeof x);
    return x;
  }
  double f64() {
    double x;
    raw(&x, sizeof x);
    return x;
  }
  std::string str() {
    const uint64_t n = len(1);
    std::string s(p_ + at_, n);
    at_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> vec() {
    const uint64_t n = len(sizeof(T));
    std::vector<T> v(n);
    raw(v.data(), n * sizeof(T));
    return v;
  }
  // Reads a vector that must have exactly `expected` elements (a tensor of known size).
  template <typename T>
  void vec_into(std::vector<T>& v, size_t expected, const char* what) {
    std::vector<T> r = vec<T>();
    if (r.size() != expected)
      throw BlobError(std::string(what) + ": " + std::to_string(r.size()) + " elements, expected " + std::to_string(expected));
    v = std::move(r);
  }
  void raw(void* p, size_t n) {
    if (n > n_ - at_) throw BlobError("truncated (needs " + std::to_string(n) + " more bytes at offset " + std::to_string(at_) + ")");
    if (n == 0) return;  // memcpy with an empty vector's null data() is undefined, even for 0 bytes
    std::memcpy(p, p_ + at_, n);
    at_ += n;
  }
  size_t left() const { return n_ - at_; }

 private:
  uint64_t len(size_t elem) {
    const uint64_t n = u64();
    if (n > (n_ - at_) / elem) throw BlobError("truncated (a length of " + std::to_string(n) + " runs past the end)");
    return n;
  }
  const char* p_;
  size_t n_, at_ = 0;
};

}  // namespace drift
