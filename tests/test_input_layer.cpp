// The input layer: what drift reads (regular files only, bounded; strict JSON: duplicate keys and
// numbers past double range refused, naming the key), where it writes (an output directory checked
// before any write) and the run directory's lock (a second holder refused with the first's pid).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/json_read.h"
#include "io/memory.h"
#include "io/out_dir.h"
#include "io/read_file.h"
#include "train/run_lock.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_input_layer {

namespace fs = std::filesystem;
using namespace drift;

namespace {

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("drift_input_layer_" + std::to_string(::getpid()));
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  }
};

// The message of the IoError `f` throws ("" when it throws none).
template <typename F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const io::IoError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("read_regular_file: regular files only, bounded, each refusal naming the file") {
  Scratch s;
  const std::string f = s.write("a.txt", "hello");
  CHECK(io::read_regular_file(f, "test file", 5) == "hello");
  CHECK(io::read_regular_file(s.write("empty", ""), "test file", 5).empty());
  const std::string big = io_error_of([&] { io::read_regular_file(f, "test file", 4); });
  CHECK(big.rfind(f + ": 5 bytes, more than the 4 bytes a test file may have", 0) == 0);
  const std::string dir = io_error_of([&] { io::read_regular_file(s.dir.string(), "test file", 100); });
  CHECK(dir == s.dir.string() + ": is a directory; expected the test file as a regular file");
  const std::string fifo = (s.dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // no writer: a blocking open would never return
  CHECK(io_error_of([&] { io::read_regular_file(fifo, "test file", 100); }) ==
        fifo + ": is a FIFO (named pipe); expected the test file as a regular file");
  CHECK(contains(io_error_of([&] { io::read_regular_file("/dev/zero", "test file", 100); }), "a character device"));
  CHECK(contains(io_error_of([&] { io::read_regular_file((s.dir / "none").string(), "test file", 100); }),
                 "none: cannot open the test file (No such file or directory)"));
}

TEST_CASE("strict JSON: duplicate keys and out-of-range numbers are refused, naming the key and the source") {
  CHECK(io::parse_json(R"({"a": {"b": 1}, "c": [{"b": 2}, {"b": 3}]})", "x")["c"][1]["b"] == 3);
  CHECK(io_error_of([] { io::parse_json(R"({"a": 1, "a": 2})", "cfg.json"); }) ==
        "cfg.json: duplicate key 'a' (each key may appear once in an object)");
  CHECK(io_error_of([] { io::parse_json(R"({"t": {"x": 1, "lr": 2, "lr": 3}})", "cfg.json"); }).rfind(
            "cfg.json: duplicate key 't.lr'", 0) == 0);
  // The same key in sibling objects (list entries) is not a duplicate.
  CHECK(io_error_of([] { io::parse_json(R"([{"a": 1}, {"a": 2}])", "l"); }).empty());
  const std::string overflow = io_error_of([] { io::parse_json(R"({"train": {"lr": 1e400}})", "cfg.json"); });
  CHECK(overflow.rfind("cfg.json: a number out of range at train.lr", 0) == 0);
  CHECK_FALSE(contains(overflow, "[json.exception"));
  const std::string syntax = io_error_of([] { io::parse_json("{\"a\": ", "cfg.json"); });
  CHECK(syntax.rfind("cfg.json: not valid JSON (", 0) == 0);
  CHECK_FALSE(contains(syntax, "[json.exception"));
  nlohmann::json j;
  CHECK_FALSE(io::try_parse_json("fast", "--set x", j));  // not JSON: the caller's bare string
  CHECK(io::try_parse_json("1.5", "--set x", j));
  CHECK(j == 1.5);
  CHECK(contains(io_error_of([&] { io::try_parse_json("-1e999", "--set x", j); }), "--set x: a number out of range"));
}

TEST_CASE("check_output_dir: a file, a path under a file, /proc, an empty name; nothing left behind") {
  Scratch s;
  const std::string file = s.write("f", "x");
  CHECK(io_error_of([&] { io::check_output_dir(file, "--out"); }) == "--out " + file + ": is a file, expected a directory");
  CHECK(io_error_of([&] { io::check_output_dir(file + "/run/x", "--out"); }) ==
        "--out " + file + "/run/x: " + file + " is a file, not a directory: nothing can be created under it");
  CHECK(contains(io_error_of([] { io::check_output_dir("/proc/drift-test/run", "--out"); }), "cannot create it"));
  CHECK(io_error_of([] { io::check_output_dir("", "--out"); }) == "--out: expected a directory name, got an empty one");
  CHECK(io_error_of([&] { io::check_output_dir((s.dir / "new" / "deeper").string(), "--out"); }).empty());
  CHECK(io_error_of([&] { io::check_output_dir(s.dir.string(), "--out"); }).empty());
  // The probes created and removed their entries: the scratch directory holds only f.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(s.dir)) entries += e.path().filename() != "f";
  CHECK(entries == 0);
  CHECK(contains(io_error_of([&] { io::check_output_file(s.dir.string(), "--out"); }), "is a directory"));
  if (::geteuid() != 0) {  // (root writes anywhere)
    fs::create_directories(s.dir / "ro");
    fs::permissions(s.dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK(contains(io_error_of([&] { io::check_output_dir((s.dir / "ro" / "run").string(), "--out"); }),
                   "Permission denied"));
    fs::permissions(s.dir / "ro", fs::perms::owner_all);
  }
}

TEST_CASE("run directory lock: a second holder is refused with the first one's pid; a created empty directory goes") {
  Scratch s;
  const std::string dir = (s.dir / "runs" / "a").string();
  {
    const RunDirLock first(dir);
    CHECK(fs::is_directory(dir));
    // flock belongs to an open file description: a second open in this process conflicts, as
    // another process would.
    const std::string why = io_error_of([&] { const RunDirLock second(dir); });
    CHECK(why == dir + ": a drift run is in progress in this directory (pid " + std::to_string(::getpid()) +
                     "); wait for it to finish, or choose another directory");
  }
  // Both directories were created by the lock and nothing was written: both removed.
  CHECK_FALSE(fs::exists(s.dir / "runs"));
  {
    const RunDirLock again(dir);
    std::ofstream(fs::path(dir) / "config.json") << "{}";
  }
  CHECK(fs::exists(fs::path(dir) / "config.json"));  // written into: kept
  const RunDirLock after(dir);                        // released when the holder went
}

TEST_CASE("check_allocation: sizes beyond memory are refused saying what was asked and why") {
  CHECK_NOTHROW(io::check_allocation(1000, 8, "x", 8000));
  try {
    io::check_allocation(1001, 8, "the product C (1001 x 1)", 8000);
    FAIL("expected TooLarge");
  } catch (const io::TooLarge& e) {
    CHECK(std::string(e.what()) == "the product C (1001 x 1): 1001 elements of 8 bytes (7.8 KiB) do not fit in this "
                                   "machine's memory (7.8 KiB)");
  }
  // No overflow for counts near 2^64.
  CHECK_THROWS_AS(io::check_allocation(UINT64_MAX, 8, "x", 1 << 30), io::TooLarge);
}

}  // namespace test_input_layer
