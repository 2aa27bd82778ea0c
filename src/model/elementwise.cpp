#include "model/elementwise.h"

#include <stdexcept>
#include <type_traits>

#include "arith/random.h"

namespace drift {

namespace {
const char* const kNames[] = {"ln_weight", "ln_bias", "ln_out", "act_in", "act_out", "softmax"};
constexpr int kKinds = 6;

// Streams come from splitmix64 (arith/random.h), as the matmul sites' do; the elementwise site index
// is offset by 2^32 so that its streams never coincide with a matmul site's (whose indices are small).
constexpr uint64_t kSiteOffset = uint64_t{1} << 32;
}  // namespace

const char* to_string(ElemTensor t) { return kNames[static_cast<int>(t)]; }

bool parse_elem_tensor(const std::string& s, ElemTensor* out) {
  for (int i = 0; i < kKinds; ++i)
    if (s == kNames[i]) {
      *out = static_cast<ElemTensor>(i);
      return true;
    }
  return false;
}

std::string elem_tensor_list() {
  std::string s;
  for (int i = 0; i < kKinds; ++i) s += (i ? ", " : "") + std::string(kNames[i]);
  return s;
}

size_t ElementwiseSites::add(const std::string& layer, ElemTensor tensor) {
  ElementwiseSite s;
  s.layer = layer;
  s.tensor = tensor;
  sites_.push_back(std::move(s));
  step_calls_.push_back(0);
  offsets_.emplace_back();
  return sites_.size() - 1;
}

LayerNormSites ElementwiseSites::add_layernorm(const std::string& layer) {
  return {add(layer, ElemTensor::ln_weight), add(layer, ElemTensor::ln_bias), add(layer, ElemTensor::ln_out)};
}

ActivationSites ElementwiseSites::add_activation(const std::string& layer) {
  return {add(layer, ElemTensor::act_in), add(layer, ElemTensor::act_out)};
}

bool ElementwiseSites::any_active() const {
  for (const auto& s : sites_)
    if (s.quantizer) return true;
  return false;
}

void ElementwiseSites::begin_step(uint64_t step) {
  step_ = step;
  for (auto& c : step_calls_) c = 0;
}

void ElementwiseSites::reset_telemetry() {
  for (auto& s : sites_) {
    s.stats = QuantStats();
    s.calls = 0;
  }
}

void ElementwiseSites::record_offsets() {
  record_ = true;
  replay_ = false;
  for (auto& o : offsets_) o.clear();
}

void ElementwiseSites::replay_offsets() {
  record_ = false;
  replay_ = true;
}

template <typename T>
void ElementwiseSites::quantize(size_t id, T* x, size_t rows, size_t k) {
  ElementwiseSite& s = sites_.at(id);
  if (!s.quantizer) return;
  const uint64_t call = step_calls_[id]++;
  const size_t n = rows * k;
  if (replay_) {
    const auto& off = offsets_[id].at(call);
    if (off.size() != n) throw std::logic_error("elementwise replay: tensor " + s.name() + " changed shape");
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<T>(static_cast<double>(x[i]) + off[i]);
    return;
  }
  work_.resize(n);
  for (size_t i = 0; i < n; ++i) work_[i] = static_cast<double>(x[i]);
  const uint64_t stream = splitmix64(splitmix64(splitmix64(step_) ^ (kSiteOffset + id)) ^ call);
  quantize_into(q_, StridedInput{work_.data(), k, 1}, rows, k, *s.quantizer, seed, stream, &s.delayed, &qws_);
  if (record_) offsets_[id].emplace_back(n);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < k; ++i) {
      const double v = q_.dequant(r, i);
      if (record_) offsets_[id].back()[r * k + i] = v - work_[r * k + i];
      x[r * k + i] = static_cast<T>(v);
    }
  if (s.calls++ == 0)
    s.stats = q_.stats;
  else
    s.stats.merge(q_.stats);
}

template void ElementwiseSites::quantize<float>(size_t, float*, size_t, size_t);
template void ElementwiseSites::quantize<double>(size_t, double*, size_t, size_t);

}  // namespace drift
