// mlp: Bengio et al. (2003). tokens (B,ctx) -> emb (B, ctx*E) -> [tanh(linear)] x L -> logits (B,V).
#include <algorithm>
#include <cmath>
#include <string>

#include "model/init.h"
#include "model/layers.h"
#include "model/model.h"

namespace drift {

namespace {

using model_init::finish_table;
using model_init::init_param;

template <typename T>
class MlpModel final : public Model<T> {
 public:
  MlpModel(const ModelConfig& c, uint64_t seed) {
    this->cfg = c;
    auto& tb = this->table;
    tb.add("wte", {c.vocab, c.embed});
    size_t in = c.context * c.embed;
    for (size_t l = 0; l < c.hidden_layers; ++l) {
      const std::string n = "hidden" + std::to_string(l);
      tb.add(n + ".w", {c.hidden, in});
      tb.add(n + ".b", {c.hidden}, false);
      hsites_.push_back(this->sites.add_linear(n));
      hact_.push_back(this->elementwise.add_activation(n));
      in = c.hidden;
    }
    tb.add("head.w", {c.vocab, in});
    tb.add("head.b", {c.vocab}, false);
    head_ = this->sites.add_linear("head");
    finish_table(*this);
    init_param(*this, "wte", 1.0, seed);
    in = c.context * c.embed;
    for (size_t l = 0; l < c.hidden_layers; ++l) {
      const std::string n = "hidden" + std::to_string(l);
      init_param(*this, n + ".w", (5.0 / 3.0) / std::sqrt(static_cast<double>(in)), seed);  // tanh gain / sqrt(fan_in)
      init_param(*this, n + ".b", 0.0, seed);
      in = c.hidden;
    }
    init_param(*this, "head.w", 0.1 / std::sqrt(static_cast<double>(in)), seed);  // small: initial loss ~ ln V
    init_param(*this, "head.b", 0.0, seed);
  }

  size_t predictions(size_t b) const override { return b; }
  const std::vector<T>& last_logits() const override { return logits_; }

  double forward(const int32_t* windows, size_t b) override {
    const auto& c = this->cfg;
    b_ = b;
    const size_t ctx = c.context, e = c.embed, v = c.vocab, h = c.hidden, nl = c.hidden_layers;
    tokens_.resize(b * ctx);
    targets_.resize(b);
    for (size_t i = 0; i < b; ++i) {
      for (size_t t = 0; t < ctx; ++t) tokens_[i * ctx + t] = windows[i * (ctx + 1) + t];
      targets_[i] = windows[i * (ctx + 1) + ctx];
    }
    emb_.resize(b * ctx * e);
    embedding_forward(emb_.data(), tokens_.data(), this->param("wte"), b * ctx, e);
    pre_.resize(nl);
    act_.resize(nl);
    actq_.resize(nl);
    const T* x = emb_.data();
    size_t in = ctx * e;
    for (size_t l = 0; l < nl; ++l) {
      const std::string n = "hidden" + std::to_string(l);
      pre_[l].resize(b * h);
      act_[l].resize(b * h);
      linear_forward(this->sites, hsites_[l], pre_[l].data(), x, this->param(n + ".w"), this->param(n + ".b"), b, in, h);
      x = activation_q_forward(this->elementwise, hact_[l], false, act_[l].data(), pre_[l].data(), b, h, actq_[l]);
      in = h;
    }
    logits_.resize(b * v);
    linear_forward(this->sites, head_, logits_.data(), x, this->param("head.w"), this->param("head.b"), b, in, v);
    probs_.resize(b * v);
    losses_.resize(b);
    return crossentropy_forward(probs_.data(), losses_.data(), logits_.data(), targets_.data(), b, v);
  }

  void backward_grads() override {
    const auto& c = this->cfg;
    const size_t b = b_, ctx = c.context, e = c.embed, v = c.vocab, h = c.hidden, nl = c.hidden_layers;
    dlogits_.resize(b * v);
    crossentropy_backward(dlogits_.data(), probs_.data(), targets_.data(), b, v, this->loss_scale);
    const size_t last_in = nl ? h : ctx * e;
    const T* last_x = nl ? act_used(nl - 1) : emb_.data();
    dx_.resize(b * std::max(h, ctx * e));
    linear_backward(this->sites, head_, dx_.data(), this->grad_product("head.w"), this->grad("head.b"), dlogits_.data(),
                    last_x, this->param("head.w"), b, last_in, v);
    dpre_.resize(b * h);
    for (size_t l = nl; l-- > 0;) {
      const std::string n = "hidden" + std::to_string(l);
      tanh_backward(dpre_.data(), dx_.data(), act_[l].data(), b * h);
      const size_t in = l ? h : ctx * e;
      const T* xin = l ? act_used(l - 1) : emb_.data();
      linear_backward(this->sites, hsites_[l], dx_.data(), this->grad_product(n + ".w"), this->grad(n + ".b"),
                      dpre_.data(), xin, this->param(n + ".w"), b, in, h);
    }
    embedding_backward(this->grad("wte"), dx_.data(), tokens_.data(), b * ctx, e);
  }

 private:
  // The hidden layer's output as the next layer read it (Q(tanh) when act_out quantizes).
  const T* act_used(size_t l) const {
    return this->elementwise.active(hact_[l].out) ? actq_[l].data() : act_[l].data();
  }
  std::vector<LinearSites> hsites_;
  std::vector<ActivationSites> hact_;
  LinearSites head_;
  size_t b_ = 0;
  std::vector<int32_t> tokens_, targets_;
  std::vector<T> emb_, logits_, probs_, losses_, dlogits_, dx_, dpre_;
  std::vector<std::vector<T>> pre_, act_, actq_;
};

}  // namespace

template <typename T>
std::unique_ptr<Model<T>> make_mlp_model(const ModelConfig& cfg, uint64_t seed) {
  return std::make_unique<MlpModel<T>>(cfg, seed);
}

template std::unique_ptr<Model<float>> make_mlp_model<float>(const ModelConfig&, uint64_t);
template std::unique_ptr<Model<double>> make_mlp_model<double>(const ModelConfig&, uint64_t);

}  // namespace drift
