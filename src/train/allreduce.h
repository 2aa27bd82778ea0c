// Simulated data-parallel gradient reduction (precision.allreduce): the batch is split into R
// ranks, each computes the gradient of its share, and the gradients are summed as a real
// all-reduce would sum them: every rank's gradient and every partial sum rounded to the wire
// format, in the order of the chosen algorithm.
//   ring  (reduce-scatter): the vector is cut into R contiguous chunks; chunk c's sum starts at
//         rank c+1 and travels the ring, each rank adding its own part:
//         (((g[c+1] + g[c+2]) + ...) + g[c])  (rank indices mod R)
//   tree  pairwise by rank distance: level d adds rank r + 2^d into rank r (r a multiple of 2^(d+1)).
// Every sum of two wire values is rounded once (exactly: TwoSum, then round_to_sum).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "arith/format.h"
#include "arith/round.h"

namespace drift {

struct AllreduceConfig {
  size_t ranks = 1;
  std::string format = "fp32";   // the wire format (a format whose values are floats)
  std::string rounding = "rne";  // a deterministic rounding mode (not sr)
  std::string order = "ring";    // ring | tree
};

// out[i] = the reduction of parts[r][i] over the ranks (a sum: the caller divides by R).
void simulated_allreduce(const std::vector<std::vector<float>>& parts, float* out, size_t n, const Format& f,
                         const RoundSpec& spec, const std::string& order);

}  // namespace drift
