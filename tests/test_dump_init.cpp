// drift train --dump-init: init/ holds every parameter bit for bit in its shape, and the windows
// of every step as int32 (steps, batch, context+1), each a contiguous piece of its split.
// (That these are the batches the loop trains on is shown by tests/scripts/pytorch_reference.sh:
// PyTorch, fed this dump, reproduces drift's per-step losses.)
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/npy.h"
#include "train/dump_init.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_dump_init {

namespace fs = std::filesystem;

namespace {

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("drift_dump_init_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
};

drift::PreparedRun tiny_run(const std::string& kind) {
  drift::RunConfig c;
  c.seed = 11;
  c.model.kind = kind;
  c.model.context = 5;
  c.model.embed = 3;
  c.model.hidden = 7;
  c.model.d_model = 8;
  c.model.heads = 2;
  c.model.layers = 1;
  c.data.path = std::string(DRIFT_SOURCE_DIR) + "/data/austen/persuasion.txt";
  c.train.steps = 4;
  c.train.batch = 3;
  c.train.eval_batches = 2;
  return drift::prepare_run(c);
}

// The int32 windows of an (n, batch, context+1) dump, after checking its header.
std::vector<int32_t> read_windows(const fs::path& p, size_t n, size_t batch, size_t width) {
  const std::string bytes = file_bytes(p);
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ", " +
                           std::to_string(batch) + ", " + std::to_string(width) + "), }";
  REQUIRE(bytes.size() > 10);
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(bytes.substr(10, dict.size()) == dict);
  const size_t data_start = 10 + (static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8);
  CHECK(data_start % 64 == 0);
  REQUIRE(bytes.size() == data_start + 4 * n * batch * width);
  std::vector<int32_t> w(n * batch * width);
  std::memcpy(w.data(), bytes.data() + data_start, 4 * w.size());
  return w;
}

// Every window is `width` consecutive tokens of `split`.
void check_slices(const std::vector<int32_t>& w, size_t width, const drift::Tokens& tokens) {
  std::vector<int32_t> split(tokens.size());
  tokens.copy(0, tokens.size(), split.data());
  for (size_t i = 0; i < w.size(); i += width) {
    const auto found = std::search(split.begin(), split.end(), w.begin() + i, w.begin() + i + width);
    CHECK_MESSAGE(found != split.end(), "window " << i / width << " is not a piece of its split");
  }
}

// Every parameter is in init/<name>.npy, float32, in its shape, bit for bit.
template <typename Model>
void check_params(const Model& m, const fs::path& init) {
  for (const auto& p : m.table.specs) {
    CAPTURE(p.name);
    const drift::io::Array a = drift::io::read_npy((init / (p.name + ".npy")).string());
    CHECK(a.shape == p.shape);
    REQUIRE(a.data.size() == p.size);
    for (size_t i = 0; i < p.size; ++i) CHECK(static_cast<float>(a.data[i]) == m.params[p.offset + i]);
    CHECK(file_bytes(init / (p.name + ".npy")).find("'descr': '<f4'") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("dump_init writes every parameter and every step's windows, atomically") {
  for (const std::string kind : {"mlp", "attn"}) {
    CAPTURE(kind);
    TempDir t;
    const drift::PreparedRun run = tiny_run(kind);
    const fs::path rd = t.dir / "run";
    drift::dump_init(run, rd.string());
    const auto& m = *run.model;
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(rd / "init")) files += e.is_regular_file();
    CHECK(files == m.table.specs.size() + 2);
    check_params(m, rd / "init");
    const size_t width = 6;  // context + 1
    check_slices(read_windows(rd / "init" / "batches.npy", 4, 3, width), width, run.corpus.train);
    check_slices(read_windows(rd / "init" / "val_batches.npy", 2, 3, width), width, run.corpus.val);
    CHECK_FALSE(fs::exists(rd / ".init.partial"));

    // A second dump replaces the first, leaving exactly one complete init/.
    fs::remove(rd / "init" / "batches.npy");
    drift::dump_init(run, rd.string());
    CHECK(fs::exists(rd / "init" / "batches.npy"));
    CHECK_FALSE(fs::exists(rd / ".init.partial"));
  }
}

TEST_CASE("dump_init into an unusable directory is an IoError naming it, and writes nothing") {
  TempDir t;
  const drift::PreparedRun run = tiny_run("mlp");
  std::ofstream(t.dir / "blocker") << "a file, not a directory";
  try {
    drift::dump_init(run, (t.dir / "blocker").string());
    FAIL("expected an IoError");
  } catch (const drift::io::IoError& e) {
    CHECK(std::string(e.what()).find("blocker") != std::string::npos);
  }
  CHECK(file_bytes(t.dir / "blocker") == "a file, not a directory");
}

TEST_CASE("dump_init of the proxy model (no corpus): the weights, the batches it draws, the label noise and the teacher") {
  TempDir t;
  const drift::PreparedRun run = tiny_run("proxy");
  REQUIRE(run.corpus.train.empty());
  const fs::path rd = t.dir / "run";
  drift::dump_init(run, rd.string());
  const auto& m = *run.model;
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(rd / "init")) files += e.is_regular_file();
  // + inputs, targets, val_inputs, val_targets, label_noise; + the teacher's input, 2 per block, head.
  CHECK(files == m.table.specs.size() + 5 + 4);
  CHECK_FALSE(fs::exists(rd / "init" / "batches.npy"));
  check_params(m, rd / "init");
  // The default proxy has no label noise: zeros, (steps * batch, output_dim) in float64.
  const drift::io::Array noise = drift::io::read_npy((rd / "init" / "label_noise.npy").string());
  CHECK(noise.shape == std::vector<size_t>{4 * 3, 8});
  for (double x : noise.data) CHECK(x == 0.0);
  // The teacher's weights, (out, in) as torch holds them: the input layer maps input_dim 32 to d_model 8.
  const drift::io::Array w_in = drift::io::read_npy((rd / "init" / "teacher.input.w.npy").string());
  CHECK(w_in.shape == std::vector<size_t>{8, 32});
  const auto teacher = m.generator_weights();
  REQUIRE(teacher.size() == 4);
  CHECK(teacher[0].name == "teacher.input.w");
  // Element (r, k) is the teacher's draw r * fan_in + k of its first stream (model/proxy.cpp), N(0, 1/32).
  for (size_t i = 0; i < w_in.data.size(); ++i)
    CHECK(w_in.data[i] == (1.0 / std::sqrt(32.0)) * drift::normal_draw(0, 0x7eac0000, i));
  for (const char* f : {"inputs.npy", "targets.npy", "val_inputs.npy", "val_targets.npy", "teacher.block0.mlp.fc.w.npy",
                        "teacher.block0.mlp.proj.w.npy", "teacher.head.w.npy"})
    CHECK(fs::exists(rd / "init" / f));
}

}  // namespace test_dump_init
