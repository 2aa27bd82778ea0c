// The language models. One interface serves every kind (makemore style): the training loop gives
// a batch of token windows and gets the mean loss; backward fills the gradient buffer.
//
// A batch is B windows of context+1 tokens (B, context+1):
//   mlp:  predicts window[context] from window[0..context)       (B predictions)
//   attn: predicts window[1..context] from window[0..context)    (B*context predictions)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/params.h"
#include "model/sites.h"

namespace drift {

struct ModelConfig {
  std::string kind = "mlp";      // mlp | attn
  size_t vocab = 256;            // set from the tokenizer
  size_t context = 16;           // tokens of context (mlp: window; attn: sequence length)
  // mlp
  size_t embed = 32;             // embedding width per token
  size_t hidden = 512;           // width of each tanh hidden layer
  size_t hidden_layers = 1;
  // attn
  size_t d_model = 64;
  size_t heads = 4;
  size_t layers = 2;
  size_t mlp_mult = 4;           // MLP width = mlp_mult * d_model
  std::string activation = "tanh";  // tanh | gelu
  double init_scale = 1.0;       // multiplies every initial weight's standard deviation
};

template <typename T>
class LmModel {
 public:
  virtual ~LmModel() = default;
  ParamTable table;
  std::vector<T> params, grads;
  MatmulSites sites;
  ModelConfig cfg;

  // windows (B, context+1). Stores what backward needs; returns the mean cross-entropy.
  virtual double forward(const int32_t* windows, size_t b) = 0;
  // grads = loss_scale * d(mean loss)/d(params) of the last forward (overwritten).
  virtual void backward() = 0;
  double loss_scale = 1.0;  // multiplies the loss gradient entering the backward pass (train/loss_scale.h)
  virtual size_t predictions(size_t b) const = 0;
  T* param(const std::string& name);
  T* grad(const std::string& name);
};

// Builds a model with initial weights drawn from the counter-based generator keyed by `seed`.
// Throws std::invalid_argument for impossible sizes (the config layer checks them first).
template <typename T>
std::unique_ptr<LmModel<T>> make_model(const ModelConfig& cfg, uint64_t seed);

// A standard normal draw from (seed, stream, index): Box-Muller on two counter-based words.
double normal_draw(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace drift
