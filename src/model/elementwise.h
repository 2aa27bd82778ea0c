// Elementwise quantization sites: the tensors outside the matmuls that a precision policy may round
// (precision.elementwise, policy/elementwise_rules.h). Each site is (layer, tensor kind); its
// quantizer is the engine's (arith/quantize.h), applied as quantize-then-dequantize ("fake
// quantization"): the tensor keeps its shape and type, and every value becomes q * scale with q on
// the format's grid, exactly what an MX emulator feeds to the next operation.
//
// Tensor kinds and where the models apply them:
//   ln_weight, ln_bias  LayerNorm γ and β as used by the forward pass (the fp32 master γ, β are untouched)
//   ln_out              LayerNorm output
//   act_in, act_out     activation function input and output (tanh / gelu)
//   softmax             attention probabilities P (before P·V)
// Layout for scaling: a tensor is (rows, k) with k its last (contiguous) axis, so scaling blocks
// run along the feature axis (γ, β: one row of C; attention probabilities: along the keys).
//
// Backward (the choice MX emulators make, e.g. microsoft/microxcaling): the straight-through
// estimator. The gradient passes through Q unchanged (dQ(x)/dx := 1); every other factor of the
// backward uses the values the forward actually used (LayerNorm's dx uses Q(γ); the weight gradient
// of the next matmul uses Q(output); tanh' and gelu' are taken at Q(input)). The gradients of γ and β
// accumulate into the fp32 masters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arith/quantize.h"
#include "arith/quantize_workspace.h"

namespace drift {

enum class ElemTensor : uint8_t { ln_weight, ln_bias, ln_out, act_in, act_out, softmax };
const char* to_string(ElemTensor t);
bool parse_elem_tensor(const std::string& s, ElemTensor* out);
// "ln_weight, ln_bias, ..." for messages.
std::string elem_tensor_list();

struct ElementwiseSite {
  std::string layer;                   // e.g. "block0.ln1", "hidden0", "block1.attn"
  ElemTensor tensor = ElemTensor::ln_out;
  std::optional<Quantizer> quantizer;  // none: the tensor is used as computed (in T)
  QuantStats stats;                    // merged over the calls since reset_telemetry()
  uint64_t calls = 0;                  // calls since reset_telemetry()
  DelayedState delayed;                // delayed scaling's amax history
  std::string name() const { return layer + "." + to_string(tensor); }
};

// The sites of one LayerNorm and of one activation function.
struct LayerNormSites {
  size_t weight = 0, bias = 0, out = 0;
};
struct ActivationSites {
  size_t in = 0, out = 0;
};

class ElementwiseSites {
 public:
  size_t add(const std::string& layer, ElemTensor tensor);
  LayerNormSites add_layernorm(const std::string& layer);
  ActivationSites add_activation(const std::string& layer);

  std::vector<ElementwiseSite>& sites() { return sites_; }
  const std::vector<ElementwiseSite>& sites() const { return sites_; }
  size_t size() const { return sites_.size(); }
  bool active(size_t id) const { return sites_.at(id).quantizer.has_value(); }
  bool any_active() const;

  // Random keys of stochastic rounding: every call gets a distinct stream from (step, site, call
  // index in the step), disjoint by construction from the matmul sites' streams.
  uint64_t seed = 0;
  void begin_step(uint64_t step);
  void reset_telemetry();

  // x (rows, k), k contiguous, replaced in place by its quantized-dequantized values when the site
  // has a quantizer (each value q * scale, computed in double and stored as T: exact whenever it
  // fits T, as every MX/fp8/bf16 value does in float); untouched otherwise.
  template <typename T>
  void quantize(size_t id, T* x, size_t rows, size_t k);
  // x itself when the site is inactive; otherwise a quantized copy in `buf`.
  template <typename T>
  const T* quantized(size_t id, const T* x, size_t rows, size_t k, std::vector<T>& buf) {
    if (!active(id)) return x;
    buf.assign(x, x + rows * k);
    quantize(id, buf.data(), rows, k);
    return buf.data();
  }

  // The straight-through surrogate, for gradient tests: record_offsets() makes every later call
  // store its quantization error Q(x) - x; replay_offsets() then makes each call (same step, same
  // order) add the stored error instead of quantizing. The replayed forward is a smooth function
  // whose gradient at the recorded point is exactly what the straight-through backward computes.
  void record_offsets();
  void replay_offsets();

 private:
  std::vector<ElementwiseSite> sites_;
  std::vector<uint64_t> step_calls_;
  uint64_t step_ = 0;
  std::vector<double> work_;
  QuantizedOperand q_;
  QuantizeWorkspace qws_;  // the quantizer's scratch, reused across calls
  bool record_ = false, replay_ = false;
  std::vector<std::vector<std::vector<double>>> offsets_;  // [site][call in step]
};

}  // namespace drift
