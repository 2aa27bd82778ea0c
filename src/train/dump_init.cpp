#include "train/dump_init.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "io/npy.h"

namespace drift {

namespace {

namespace fs = std::filesystem;

// Every window of `draws` draws of `batch` windows from one data stream, as sample_windows gives them.
std::vector<int32_t> all_windows(const std::vector<int32_t>& tokens, size_t context, size_t batch, uint64_t seed,
                                 uint64_t stream, size_t draws) {
  const size_t per_draw = batch * (context + 1);
  std::vector<int32_t> out(draws * per_draw);
  for (size_t d = 0; d < draws; ++d) sample_windows(tokens, context, batch, seed, stream, d, out.data() + d * per_draw);
  return out;
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
    // Token windows exist only for the text models: the proxy model draws its Gaussian inputs
    // itself (model/proxy.cpp) and has no corpus, so its dump is the weights alone.
    if (m.needs_text()) {
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
