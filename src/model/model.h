// The models. One interface, Model<T>, serves every kind (makemore style): the training loop gives
// a batch and gets the mean loss; backward fills the gradient buffer. Each kind is one file and one
// row of the kind table (model.cpp: its name, whether it trains on text, its factory).
//
// Text models take a batch of B windows of context+1 tokens (B, context+1) through forward():
//   mlp  (model/mlp.cpp):  predicts window[context] from window[0..context)       (B predictions)
//   attn (model/attn.cpp): predicts window[1..context] from window[0..context)    (B*context predictions)
// The proxy model (model/proxy.cpp) needs no text: it draws its own batch of B Gaussian inputs
// from (seed, stream, draw) through forward_generated() and scores them against a fixed teacher
// (B predictions, MSE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/elementwise.h"
#include "model/params.h"
#include "model/sites.h"

namespace drift {

struct ModelConfig {
  std::string kind = "mlp";      // mlp | attn | proxy
  size_t vocab = 256;            // set from the tokenizer
  size_t context = 16;           // tokens of context (mlp: window; attn: sequence length)
  // mlp
  size_t embed = 32;             // embedding width per token
  size_t hidden = 512;           // width of each tanh hidden layer
  size_t hidden_layers = 1;
  // attn (and proxy: d_model, layers, mlp_mult, activation)
  size_t d_model = 64;
  size_t heads = 4;
  size_t layers = 2;
  size_t mlp_mult = 4;           // MLP width = mlp_mult * d_model
  std::string activation = "tanh";  // tanh | gelu
  // proxy
  size_t input_dim = 32;         // width of the Gaussian inputs
  size_t output_dim = 8;         // width of the teacher's (and student's) output
  uint64_t teacher_seed = 0;     // keys the teacher's weights (not the run's seed)
  double init_scale = 1.0;       // multiplies every initial weight's standard deviation
  // proxy, the forms of the MX-instability paper's student-teacher task (model/proxy.cpp); the
  // defaults are drift's original proxy.
  std::string student = "projected";  // projected (input layer, ln_f, head) | residual (x is the stream)
  bool fc_bias = true;                // block<l>.mlp.fc has a bias
  std::string teacher = "projected";  // projected (the projected student's architecture) | mlp (plain MLP blocks)
  size_t teacher_width = 0;           // teacher mlp: hidden width (0: d_model)
  size_t teacher_depth = 0;           // teacher mlp: blocks (0: layers)
  std::string init = "normal";        // normal: N(0, 1/fan_in) | torch_uniform: nn.Linear's U(±1/sqrt(fan_in))
  double label_noise = 0;             // std of Gaussian noise added to the training targets
};

// A fixed tensor of a model's data generator (the proxy's teacher): a linear weight (out, in) in double.
struct GeneratorTensor {
  std::string name;
  std::vector<size_t> shape;
  std::vector<double> values;
};

template <typename T>
class Model {
 public:
  virtual ~Model() = default;
  ParamTable table;
  std::vector<T> params, grads;
  MatmulSites sites;
  ElementwiseSites elementwise;  // LayerNorm / activation / softmax quantizers (precision.elementwise)
  ModelConfig cfg;

  // Text models: windows (B, context+1). Stores what backward needs; returns the mean loss.
  virtual double forward(const int32_t* windows, size_t b) = 0;
  // Models that draw their own data (needs_text() false): a batch of b examples from (the model's
  // seed, stream, draw), as sample_windows draws text windows; returns the mean loss. Text models throw.
  // With a `noise_stream` (training batches), a model with label noise adds it to the targets, drawn
  // from (the model's seed, noise_stream, the same draw); without one (validation) the targets are clean.
  virtual double forward_generated(uint64_t stream, uint64_t draw, size_t b,
                                   std::optional<uint64_t> noise_stream = std::nullopt);
  bool needs_text() const;  // the kind's row: trains on text (model_needs_text)
  // Models that draw their own data: batch (stream, draw) as forward_generated draws it, without
  // running the model (for --dump-init): inputs (b, input_dim) and targets (b, output_dim) as the
  // model holds them, and the label noise in each target (zeros without a noise stream). Text models throw.
  struct GeneratedBatch {
    std::vector<T> inputs, targets;
    std::vector<double> noise;
  };
  virtual GeneratedBatch generated_batch(uint64_t stream, uint64_t draw, size_t b,
                                         std::optional<uint64_t> noise_stream) const;
  // The fixed weights of a model's data generator (the proxy's teacher); none for text models.
  virtual std::vector<GeneratorTensor> generator_weights() const { return {}; }
  // Models that draw their own data: round the drawn inputs and targets to float even when T is
  // wider, so that an fp64 copy of a float run sees that run's batch exactly (diagnostics).
  bool float_data = false;
  // grads = loss_scale * d(mean loss)/d(params) of the last forward (overwritten): the kind's
  // backward_grads(), each gradient starting from +0 (cleared where it is first used: grad(),
  // grad_product(); end_grads() clears the rest).
  void backward();
  double loss_scale = 1.0;  // multiplies the loss gradient entering the backward pass (train/loss_scale.h)
  virtual size_t predictions(size_t b) const = 0;
  // The logits of the last forward (predictions x vocab), for diagnostics; empty if a model keeps none.
  virtual const std::vector<T>& last_logits() const { return no_logits_; }
  T* param(const std::string& name);
  // The gradient of `name`. Inside backward(), a tensor's first use in it clears the tensor to +0.
  T* grad(const std::string& name);
  // Inside backward(): the gradient of `name` as the destination of a product that covers it whole
  // (a linear layer's dW), added in: WriteC::add_to_zero while the tensor is not yet cleared, so
  // that it never is (the same bits as adding into +0, and a megabyte less memory traffic at the
  // mlp's size), WriteC::add after.
  WriteTo<T> grad_product(const std::string& name);
  // Both site registries at once: random streams keyed by `step`, telemetry since the last reset.
  void begin_step(uint64_t step) {
    sites.begin_step(step);
    elementwise.begin_step(step);
  }
  void reset_telemetry() {
    sites.reset_telemetry();
    elementwise.reset_telemetry();
  }

 protected:
  // The kind's backward pass: every gradient it writes through grad() or grad_product().
  virtual void backward_grads() = 0;

 private:
  // Inside backward(): the tensors (by table index) not yet cleared or written this pass. The first
  // use of each clears it, and end_grads() clears those no use reached, so every gradient starts at
  // +0 without a pass over the whole buffer first.
  std::vector<uint8_t> uncleared_;
  bool in_backward_ = false;
  size_t tensor_index(const std::string& name) const;
  void end_grads();
  std::vector<T> no_logits_;
};

// Whether a model kind trains on text (mlp, attn) or draws its own inputs (proxy): the trainer
// loads a corpus only for the former. Throws std::invalid_argument for an unknown kind.
bool model_needs_text(const ModelConfig& cfg);
// The kinds' names, in table order ("mlp", "attn", "proxy").
std::vector<std::string> model_kind_names();

// Builds a model of cfg.kind with initial weights drawn from the counter-based generator keyed by
// `seed` (which also keys the elementwise sites' stochastic rounding and the proxy's inputs).
// Throws std::invalid_argument for an unknown kind or impossible sizes (the config layer checks
// them first).
template <typename T>
std::unique_ptr<Model<T>> make_model(const ModelConfig& cfg, uint64_t seed);

// A standard normal draw from (seed, stream, index): Box-Muller on two counter-based words.
double normal_draw(uint64_t seed, uint64_t stream, uint64_t index);
// A uniform draw in (-1, 1) from (seed, stream, index): one counter-based word, (2 w + 1) / 2^32 - 1
// (exact in double, symmetric about 0, never ±1).
double uniform_draw(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace drift
