// .npy and text matrices: round trips, both header versions, and clear rejections.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "io/npy.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_npy {

namespace fs = std::filesystem;
using drift::io::Array;
using drift::io::Dtype;
using drift::io::IoError;

namespace {

// A fresh directory per test case, removed at the end.
struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() / ("drift_npy_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A hand-made .npy: header dict `dict`, format version `major`, raw data bytes appended.
std::string npy_bytes(const std::string& dict, int major, const std::string& data) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  const size_t total = prefix + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  const size_t n = h.size();
  for (size_t k = 0; k < (major == 1 ? 2u : 4u); ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  return out + h + data;
}

template <typename T>
std::string raw(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

std::string error_of(const std::string& path) {
  try {
    drift::io::read_array(path);
  } catch (const IoError& e) {
    return e.what();
  }
  FAIL("expected an IoError reading " << path);
  return "";
}

}  // namespace

TEST_CASE("npy round trip: float64 and float32, 1-D and 2-D") {
  TempDir t;
  Array a;
  a.shape = {2, 3};
  a.data = {1.0, -2.5, 0.1, std::numeric_limits<double>::infinity(), -0.0, 1e-300};
  drift::io::write_npy(t.file("a.npy"), a, Dtype::f8);
  const Array b = drift::io::read_npy(t.file("a.npy"));
  CHECK(b.shape == a.shape);
  REQUIRE(b.data.size() == a.data.size());
  CHECK(std::memcmp(b.data.data(), a.data.data(), 8 * a.data.size()) == 0);  // bit for bit, -0 included

  drift::io::write_npy(t.file("f.npy"), a, Dtype::f4);
  const Array f = drift::io::read_npy(t.file("f.npy"));
  CHECK(f.shape == a.shape);
  for (size_t k = 0; k < a.data.size(); ++k) CHECK(f.data[k] == static_cast<double>(static_cast<float>(a.data[k])));

  Array v;
  v.shape = {4};
  v.data = {1, 2, 3, 4};
  drift::io::write_npy(t.file("v.npy"), v, Dtype::f8);
  const Array w = drift::io::read_npy(t.file("v.npy"));
  CHECK(w.shape == std::vector<size_t>{4});
  CHECK(w.data == v.data);
  CHECK(w.rows() == 1);
  CHECK(w.cols() == 4);

  // The header is what numpy writes: data aligned to 64 bytes, version 1.0.
  std::ifstream in(t.file("v.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes[6] == 1);
  CHECK((bytes.size() - 32) % 64 == 0);
  CHECK(bytes.find("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }") != std::string::npos);
}

TEST_CASE("typed dumps of any rank: the bytes numpy writes for int32 and float32") {
  TempDir t;
  auto file_bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  // (2, 1, 3) int32: the header dict numpy.save writes, padded so the data starts at a multiple of 64.
  const int32_t ints[] = {0, 1, -1, 255, 2147483647, -2147483647 - 1};
  drift::io::write_npy_i32(t.file("i.npy"), {2, 1, 3}, ints);
  CHECK(file_bytes(t.file("i.npy")) ==
        npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1, 3), }", 1,
                  raw<int32_t>({0, 1, -1, 255, 2147483647, -2147483647 - 1})));
  const std::string ib = file_bytes(t.file("i.npy"));
  const size_t data_start = 10 + (static_cast<unsigned char>(ib[8]) | static_cast<unsigned char>(ib[9]) << 8);
  CHECK(data_start == 128);  // the 63-character dict, padded: data aligned to 64 bytes
  CHECK(ib.size() == data_start + 24);
  // float32 bits are copied, not converted: -0 and a NaN payload survive.
  float nan_payload;
  const uint32_t bits = 0x7fc00123u;
  std::memcpy(&nan_payload, &bits, 4);
  const float floats[] = {-0.0f, 1.5f, nan_payload, 1e-45f};
  drift::io::write_npy_f32(t.file("f.npy"), {4}, floats);
  CHECK(file_bytes(t.file("f.npy")) ==
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 1, raw<float>({-0.0f, 1.5f, nan_payload, 1e-45f})));
  // An empty dimension is a valid array with no data.
  drift::io::write_npy_i32(t.file("e.npy"), {0, 5}, nullptr);
  CHECK(file_bytes(t.file("e.npy")) == npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (0, 5), }", 1, ""));
}

TEST_CASE("npy headers of version 1.0 and 2.0 are read") {
  TempDir t;
  write_bytes(t.file("v1.npy"), npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 1,
                                          raw<float>({1.5f, 2.0f, -3.0f, 0.25f})));
  write_bytes(t.file("v2.npy"), npy_bytes("{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (3,)}", 2,
                                          raw<double>({7.0, 8.0, 9.0})));
  const Array a = drift::io::read_npy(t.file("v1.npy"));
  CHECK(a.shape == std::vector<size_t>{2, 2});
  CHECK(a.data == std::vector<double>{1.5, 2.0, -3.0, 0.25});
  const Array b = drift::io::read_npy(t.file("v2.npy"));
  CHECK(b.shape == std::vector<size_t>{3});
  CHECK(b.data == std::vector<double>{7, 8, 9});
}

TEST_CASE("npy rejects what it does not support, naming the file and what it found") {
  TempDir t;
  const std::string i4 = t.file("x.npy");
  write_bytes(i4, npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 1, raw<int32_t>({1, 2})));
  CHECK(error_of(i4) == i4 + ": dtype '<i4' is not supported (expected float32 or float64: '<f4' or '<f8')");

  const std::string fo = t.file("fortran.npy");
  write_bytes(fo, npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", 1, raw<double>({1, 2, 3, 4})));
  CHECK(error_of(fo).find(fo + ": fortran_order True is not supported") == 0);

  const std::string tr = t.file("trunc.npy");
  write_bytes(tr, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 1, raw<double>({1, 2, 3})));
  CHECK(error_of(tr) == tr + ": truncated: shape (2, 3) of float64 needs 48 bytes of data, the file has 24");

  const std::string th = t.file("trunc_header.npy");
  write_bytes(th, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 1, "").substr(0, 30));
  CHECK(error_of(th).find(th + ": truncated .npy header") == 0);

  const std::string d3 = t.file("cube.npy");
  write_bytes(d3, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1), }", 1, raw<double>({1})));
  CHECK(error_of(d3) == d3 + ": 3-D shape (1, 1, 1) is not supported (expected 1-D or 2-D)");

  const std::string be = t.file("big.npy");
  write_bytes(be, npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", 1, raw<double>({1})));
  CHECK(error_of(be).find("big-endian") != std::string::npos);

  const std::string v3 = t.file("v3.npy");
  write_bytes(v3, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 3, raw<double>({1})));
  CHECK(error_of(v3).find("version 3.0 is not supported") != std::string::npos);

  const std::string junk = t.file("junk.npy");
  write_bytes(junk, "hello, world");
  CHECK(error_of(junk) == junk + ": not a .npy file (missing the \\x93NUMPY magic)");

  const std::string missing = t.file("missing.npy");
  CHECK(error_of(missing).find(missing + ": cannot open") == 0);
}

TEST_CASE("text matrices") {
  TempDir t;
  write_bytes(t.file("m.txt"), "# a comment\n1 2 3\n\n4.5 -5e-1 inf\n");
  const Array a = drift::io::read_array(t.file("m.txt"));
  CHECK(a.shape == std::vector<size_t>{2, 3});
  CHECK(a.data[4] == -0.5);
  drift::io::write_array(t.file("out.txt"), a, Dtype::f8);
  CHECK(drift::io::read_array(t.file("out.txt")).data == a.data);

  write_bytes(t.file("ragged.txt"), "1 2 3\n4 5\n");
  CHECK(error_of(t.file("ragged.txt")) == t.file("ragged.txt") + ": line 2 has 2 numbers, expected 3 (as on line 1)");
  write_bytes(t.file("word.txt"), "1 two\n");
  CHECK(error_of(t.file("word.txt")) == t.file("word.txt") + ": line 1: 'two' is not a number");
  write_bytes(t.file("empty.txt"), "\n# nothing\n");
  CHECK(error_of(t.file("empty.txt")).find("no numbers found") != std::string::npos);
}

TEST_CASE("writes are atomic: a failed write leaves neither output nor temporary file") {
  TempDir t;
  Array a;
  a.shape = {1};
  a.data = {1.0};
  CHECK_THROWS_AS(drift::io::write_npy(t.file("no_such_dir/out.npy"), a, Dtype::f8), IoError);
  CHECK(!fs::exists(t.file("no_such_dir")));
  // Overwriting replaces the whole file, and no temporary is left beside it.
  drift::io::write_npy(t.file("o.npy"), a, Dtype::f8);
  a.shape = {2};
  a.data = {2.0, 3.0};
  drift::io::write_npy(t.file("o.npy"), a, Dtype::f8);
  CHECK(drift::io::read_npy(t.file("o.npy")).data == a.data);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(t.dir)) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
}

}  // namespace test_npy
