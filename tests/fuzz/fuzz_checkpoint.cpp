// libFuzzer target: the checkpoint reader, as --resume-from reads a file into a small proxy model
// (no data file needed). The first input byte chooses what the rest is: 0, a whole checkpoint file
// (framing: magic, version, length, checksum); otherwise a payload, which the target frames with a
// correct checksum so that the fuzzer reaches the state parser behind it. Every input must load or
// give a CheckpointError; any other exception, a crash or a sanitizer finding is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "train/checkpoint.h"
#include "train/trainer.h"

namespace {

drift::PreparedRun& tiny_proxy_run() {
  static std::unique_ptr<drift::PreparedRun> run = [] {
    drift::RunConfig c;
    c.model.kind = "proxy";
    c.model.input_dim = 4;
    c.model.output_dim = 3;
    c.model.d_model = 8;
    c.model.layers = 1;
    c.train.batch = 2;
    return std::make_unique<drift::PreparedRun>(drift::prepare_run(c));
  }();
  return *run;
}

const std::string& scratch_file() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("drift_fuzz_checkpoint_" + std::to_string(::getpid()) + ".bin")).string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string file;
  if (data[0] == 0) {
    file = body;
  } else {
    // The framing of write_checkpoint around `body` as the payload.
    auto u64 = [&file](uint64_t x) { file.append(reinterpret_cast<const char*>(&x), sizeof x); };
    file = "DRIFTCKP";
    u64(drift::kCheckpointFormat);
    u64(body.size());
    file += body;
    u64(drift::fnv1a64(body));
  }
  std::ofstream(scratch_file(), std::ios::binary | std::ios::trunc) << file;
  try {
    drift::load_checkpoint_into(scratch_file(), tiny_proxy_run());
  } catch (const drift::CheckpointError&) {
  }
  return 0;
}
