// What metrics.jsonl records about a step besides the loss: the engine's per-site quantization
// telemetry (and its sums per tensor class), per-tensor gradient norms, and z-scores of the loss
// and the gradient norm against a trailing window.
#pragma once

#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/params.h"
#include "model/sites.h"
#include "train/blob.h"

namespace drift {

// {"<layer>.<role>": {"a": Q, "b": Q}, ...} over the sites called since the last reset, where
// Q = {elements, clipped, flushed, subnormal, amax[, scale_exp: {min, max, mean}]}; with
// `swamping`, also inner_adds, inner_swamped, outer_adds, outer_swamped per site.
nlohmann::ordered_json site_metrics(const MatmulSites& sites, bool swamping = false);

// {"activation"|"weight"|"gradient": {elements, clipped, flushed, subnormal, amax}}: the same
// counts summed over every operand of that class (amax: the largest).
nlohmann::ordered_json class_metrics(const MatmulSites& sites);

// Per site, the calls of each route (MatmulSite::routes): {"hidden0.forward": {"fast.fp32": 2000}}.
// How the products were computed (it differs between CPUs and backends), never what they are.
nlohmann::ordered_json route_metrics(const MatmulSites& sites);

// Block-scaled (MX) operands whose blocks came out shorter than the format's block: the matmul's K
// is smaller than the block (or not a multiple of it), legal but not the format's block size. One
// sentence naming each such site.operand and its average block ("" when none), from the telemetry
// since the last reset (elements / scale blocks < block; blocks of zeros carry no scale and are not
// counted, so a short block can only be missed, never invented). drift train prints it after its
// first step.
std::string short_scale_blocks(const MatmulSites& sites);

// The largest per-tensor gradient norm and the tensor it belongs to (a tail statistic beside the
// global norm; train/grad_norms.h computes both).
struct TensorNormMax {
  double norm = 0;
  std::string tensor;
};

// z = (x - mean) / std of the previous `window` finite values (population std); NaN when fewer than
// two values or std = 0. push() after reading z.
class RollingZ {
 public:
  explicit RollingZ(size_t window = 50) : window_(window) {}
  double z(double x) const;
  void push(double x);
  void save(BlobWriter& w) const;
  void restore(BlobReader& r);

 private:
  size_t window_;
  std::deque<double> v_;
};

}  // namespace drift
