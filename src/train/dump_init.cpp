#include "train/dump_init.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "io/npy.h"

namespace drift {

namespace {

namespace fs = std::filesystem;

// Every window of `draws` draws of `batch` windows from one data stream, as sample_windows gives them.
std::vector<int32_t> all_windows(const Tokens& tokens, size_t context, size_t batch, uint64_t seed,
                                 uint64_t stream, size_t draws) {
  const size_t per_draw = batch * (context + 1);
  std::vector<int32_t> out(draws * per_draw);
  for (size_t d = 0; d < draws; ++d) sample_windows(tokens, context, batch, seed, stream, d, out.data() + d * per_draw);
  return out;
}

// A model that draws its own batches (the proxy): what it draws for every training step (with the
// label noise) and every validation batch (without), as the float model holds them, the noise in
// each training target, and its data generator's weights (float64).
void dump_generated(const Model<float>& m, const RunConfig& c, const fs::path& dir) {
  const size_t b = c.train.batch, din = c.model.input_dim, o = c.model.output_dim;
  auto draws = [&](uint64_t stream, size_t n, std::optional<uint64_t> noise_stream, const std::string& prefix) {
    std::vector<float> x, y;
    std::vector<double> noise;
    for (size_t d = 0; d < n; ++d) {
      const auto g = m.generated_batch(stream, d, b, noise_stream);
      x.insert(x.end(), g.inputs.begin(), g.inputs.end());
      y.insert(y.end(), g.targets.begin(), g.targets.end());
      noise.insert(noise.end(), g.noise.begin(), g.noise.end());
    }
    io::write_npy_f32((dir / (prefix + "inputs.npy")).string(), {n, b, din}, x.data());
    io::write_npy_f32((dir / (prefix + "targets.npy")).string(), {n, b, o}, y.data());
    if (noise_stream) io::write_npy((dir / "label_noise.npy").string(), io::Array{{n * b, o}, noise}, io::Dtype::f8);
  };
  // As the training loop draws them: step s is draw s of the training stream, its noise draw s of the
  // label-noise stream; evaluation batch i is draw i of the validation stream.
  draws(kTrainDataStream, c.train.steps, kLabelNoiseStream, "");
  draws(kValDataStream, c.train.eval_batches, std::nullopt, "val_");
  for (const GeneratorTensor& t : m.generator_weights())
    io::write_npy((dir / (t.name + ".npy")).string(), io::Array{t.shape, t.values}, io::Dtype::f8);
}

void fs_check(const std::error_code& ec, const fs::path& p, const char* what) {
  if (ec) throw io::IoError(p.string() + ": cannot " + what + " (" + ec.message() + ")");
}

}  // namespace

void dump_init(const PreparedRun& run, const std::string& run_dir) {
  const RunConfig& c = run.cfg;
  const auto& m = *run.model;
  const fs::path dir(run_dir), final_dir = dir / "init", tmp_dir = dir / ".init.partial";
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs_check(ec, dir, "create the run directory");
  fs::remove_all(tmp_dir, ec);
  fs_check(ec, tmp_dir, "remove");
  fs::create_directory(tmp_dir, ec);
  fs_check(ec, tmp_dir, "create");
  try {
    for (const ParamSpec& p : m.table.specs)
      io::write_npy_f32((tmp_dir / (p.name + ".npy")).string(), p.shape, m.params.data() + p.offset);
    if (!m.needs_text()) {
      dump_generated(m, c, tmp_dir);
    } else {
      const size_t ctx = c.model.context, b = c.train.batch;
      // The training loop draws step s's windows as draw s of the training stream; evaluation draws
      // batch i as draw i of the validation stream (the same windows at every evaluation).
      io::write_npy_i32((tmp_dir / "batches.npy").string(), {c.train.steps, b, ctx + 1},
                        all_windows(run.corpus.train, ctx, b, c.seed, kTrainDataStream, c.train.steps).data());
      io::write_npy_i32((tmp_dir / "val_batches.npy").string(), {c.train.eval_batches, b, ctx + 1},
                        all_windows(run.corpus.val, ctx, b, c.seed, kValDataStream, c.train.eval_batches).data());
    }
  } catch (...) {
    fs::remove_all(tmp_dir, ec);
    throw;
  }
  fs::remove_all(final_dir, ec);
  fs_check(ec, final_dir, "remove the previous dump");
  fs::rename(tmp_dir, final_dir, ec);
  fs_check(ec, final_dir, "move the finished dump into place");
}

}  // namespace drift
