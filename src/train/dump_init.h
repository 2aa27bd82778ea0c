// `drift train --dump-init`: what an independent implementation needs to replay a run from the same
// starting point (scripts/reference_pytorch.py): the initial weights and every batch the loop draws.
//   <run dir>/init/<param name>.npy   float32, the tensor's shape, the weights before any step
//   <run dir>/init/batches.npy        int32 (steps, batch, context+1): step s's training windows
//   <run dir>/init/val_batches.npy    int32 (eval_batches, batch, context+1): the validation windows
// A model that draws its own batches (proxy) has no windows; instead
//   <run dir>/init/inputs.npy, targets.npy          float32 (steps, batch, input_dim / output_dim)
//   <run dir>/init/val_inputs.npy, val_targets.npy  float32 (eval_batches, batch, ...): validation
//   <run dir>/init/label_noise.npy                  float64 (steps * batch, output_dim): the noise in targets
//   <run dir>/init/teacher.<layer>.w.npy            float64 (out, in): the teacher's weights
#pragma once

#include <string>

#include "train/trainer.h"

namespace drift {

// Writes <run_dir>/init/ for a prepared run whose model has not yet taken a step. The files are
// written into a temporary directory that is renamed to init/ when complete (replacing an older
// init/), so a failure never leaves a partial dump. Throws io::IoError naming the file.
void dump_init(const PreparedRun& run, const std::string& run_dir);

}  // namespace drift
