#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "arith/random.h"

namespace drift {

double normal_draw(uint64_t seed, uint64_t stream, uint64_t index) {
  // Words 2 index and 2 index + 1 of the stream (random_u32's): one Philox block holds both.
  const auto block = philox_block(seed, stream, index >> 1);
  const uint32_t w0 = block.v[(2 * index) & 3], w1 = block.v[(2 * index + 1) & 3];
  const double u1 = (static_cast<double>(w0) + 1.0) / 4294967296.0;  // (0, 1]
  const double u2 = static_cast<double>(w1) / 4294967296.0;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double uniform_draw(uint64_t seed, uint64_t stream, uint64_t index) {
  return (2.0 * static_cast<double>(random_u32(seed, stream, index)) + 1.0) / 4294967296.0 - 1.0;
}

template <typename T>
size_t Model<T>::tensor_index(const std::string& name) const {
  const ParamSpec* p = table.find(name);
  if (!p) throw std::invalid_argument("no parameter '" + name + "'");
  return static_cast<size_t>(p - table.specs.data());
}

template <typename T>
T* Model<T>::param(const std::string& name) {
  return params.data() + table.specs[tensor_index(name)].offset;
}

template <typename T>
T* Model<T>::grad(const std::string& name) {
  const size_t t = tensor_index(name);
  T* g = grads.data() + table.specs[t].offset;
  if (in_backward_ && uncleared_[t]) {
    std::fill(g, g + table.specs[t].size, T(0));
    uncleared_[t] = 0;
  }
  return g;
}

template <typename T>
WriteTo<T> Model<T>::grad_product(const std::string& name) {
  if (!in_backward_) throw std::logic_error("grad_product('" + name + "') outside backward()");
  const size_t t = tensor_index(name);
  const WriteC how = uncleared_[t] ? WriteC::add_to_zero : WriteC::add;
  uncleared_[t] = 0;
  return {grads.data() + table.specs[t].offset, how};
}

template <typename T>
void Model<T>::backward() {
  uncleared_.assign(table.specs.size(), 1);
  in_backward_ = true;
  try {
    backward_grads();
  } catch (...) {
    in_backward_ = false;
    throw;
  }
  end_grads();
}

template <typename T>
void Model<T>::end_grads() {
  in_backward_ = false;
  for (size_t t = 0; t < table.specs.size(); ++t)
    if (uncleared_[t]) {
      const ParamSpec& p = table.specs[t];
      std::fill(grads.data() + p.offset, grads.data() + p.offset + p.size, T(0));
    }
}

template <typename T>
double Model<T>::forward_generated(uint64_t, uint64_t, size_t, std::optional<uint64_t>) {
  throw std::logic_error("the " + cfg.kind + " model trains on text: call forward with token windows");
}

template <typename T>
typename Model<T>::GeneratedBatch Model<T>::generated_batch(uint64_t, uint64_t, size_t,
                                                                std::optional<uint64_t>) const {
  throw std::logic_error("the " + cfg.kind + " model trains on text: it draws no batches of its own");
}

// The model kinds: a new model is its file (a class deriving Model<T> and its make_<kind>_model)
// and a row here, with its factory's declaration.
template <typename T>
std::unique_ptr<Model<T>> make_mlp_model(const ModelConfig& cfg, uint64_t seed);    // model/mlp.cpp
template <typename T>
std::unique_ptr<Model<T>> make_attn_model(const ModelConfig& cfg, uint64_t seed);   // model/attn.cpp
template <typename T>
std::unique_ptr<Model<T>> make_proxy_model(const ModelConfig& cfg, uint64_t seed);  // model/proxy.cpp

namespace {

struct ModelKind {
  const char* name;  // model.kind
  bool needs_text;   // trains on token windows of a corpus; else draws its own data (forward_generated)
  std::unique_ptr<Model<float>> (*make_float)(const ModelConfig&, uint64_t);
  std::unique_ptr<Model<double>> (*make_double)(const ModelConfig&, uint64_t);
};

const ModelKind kModelKinds[] = {
    {"mlp", true, make_mlp_model<float>, make_mlp_model<double>},
    {"attn", true, make_attn_model<float>, make_attn_model<double>},
    {"proxy", false, make_proxy_model<float>, make_proxy_model<double>},
};

const ModelKind& model_kind(const std::string& name) {
  for (const ModelKind& k : kModelKinds)
    if (name == k.name) return k;
  throw std::invalid_argument("unknown model kind '" + name + "'");
}

}  // namespace

bool model_needs_text(const ModelConfig& cfg) { return model_kind(cfg.kind).needs_text; }

std::vector<std::string> model_kind_names() {
  std::vector<std::string> names;
  for (const ModelKind& k : kModelKinds) names.push_back(k.name);
  return names;
}

template <typename T>
bool Model<T>::needs_text() const {
  return model_needs_text(cfg);
}

template <typename T>
std::unique_ptr<Model<T>> make_model(const ModelConfig& cfg, uint64_t seed) {
  const ModelKind& kind = model_kind(cfg.kind);
  // (The text models size their embedding and windows by these; the proxy draws its own data.)
  if (kind.needs_text && (cfg.vocab == 0 || cfg.context == 0))
    throw std::invalid_argument("vocab and context must be positive");
  std::unique_ptr<Model<T>> m;
  if constexpr (std::is_same_v<T, float>)
    m = kind.make_float(cfg, seed);
  else
    m = kind.make_double(cfg, seed);
  m->elementwise.seed = seed;
  return m;
}

template class Model<float>;
template class Model<double>;
template std::unique_ptr<Model<float>> make_model<float>(const ModelConfig&, uint64_t);
template std::unique_ptr<Model<double>> make_model<double>(const ModelConfig&, uint64_t);

}  // namespace drift
