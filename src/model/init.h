// Shared by the model files: the parameter buffer and its initial values, each tensor drawn from
// the counter-based generator keyed by (seed, its index in the table).
#pragma once

#include <string>

#include "io/memory.h"
#include "model/model.h"

namespace drift::model_init {

constexpr uint64_t kInitStream = 0x1000;  // + parameter index

// The parameter tensor `name`: element i = static_cast<T>(float(draw(stream, i))), its random stream
// keyed by its index in the table.
template <typename T, typename Draw>
void fill_param(Model<T>& m, const std::string& name, Draw draw) {
  const ParamSpec* p = m.table.find(name);
  const uint64_t stream = kInitStream + static_cast<uint64_t>(p - m.table.specs.data());
  T* x = m.params.data() + p->offset;
  for (size_t i = 0; i < p->size; ++i) x[i] = static_cast<T>(static_cast<float>(draw(stream, i)));
}

// Fills each tensor with N(0, std^2) (std 0: constant `fill`), keyed by its index in the table.
template <typename T>
void init_param(Model<T>& m, const std::string& name, double stddev, uint64_t seed, double fill = 0.0) {
  if (stddev > 0)
    fill_param(m, name, [&](uint64_t stream, uint64_t i) { return stddev * m.cfg.init_scale * normal_draw(seed, stream, i); });
  else
    fill_param(m, name, [&](uint64_t, uint64_t) { return fill; });
}

// Fills a tensor with U(-bound, bound) times model.init_scale (torch nn.Linear's default for a
// weight or bias of a layer with fan_in inputs: bound 1/sqrt(fan_in)), keyed as init_param.
template <typename T>
void init_param_uniform(Model<T>& m, const std::string& name, double bound, uint64_t seed) {
  fill_param(m, name, [&](uint64_t stream, uint64_t i) { return bound * m.cfg.init_scale * uniform_draw(seed, stream, i); });
}

// Allocates params and grads once every tensor is in the table.
template <typename T>
void finish_table(Model<T>& m) {
  // The parameters, their gradients and (in training) two optimizer moments per parameter.
  io::check_allocation(uint64_t{4} * m.table.total, sizeof(T),
                       "model parameters, gradients and optimizer state (" + std::to_string(m.table.total) +
                           " parameters from the model's dimensions)");
  m.params.assign(m.table.total, T(0));
  m.grads.assign(m.table.total, T(0));
}

}  // namespace drift::model_init
