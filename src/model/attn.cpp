// attn: a pre-LayerNorm transformer (GPT-2 layout, llm.c's gpt2 without weight tying).
//   x = wte[tok] + wpe[t];  per block: x += proj(attn(ln1(x)));  x += fc2(act(fc1(ln2(x))));
//   logits = head(ln_f(x)).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/init.h"
#include "model/layers.h"
#include "model/model.h"

namespace drift {

namespace {

using model_init::finish_table;
using model_init::init_param;

template <typename T>
class AttnModel final : public Model<T> {
  struct Block {
    LinearSites qkv, score, value, proj, fc, fc2;
    LayerNormSites ln1s, ln2s;
    size_t softmax = 0;
    ActivationSites acts;
    std::vector<T> ln1, ln1_mean, ln1_rstd, qkv_out, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch, fch_act, res3;
    std::vector<T> ln1w_q, ln1b_q, ln2w_q, ln2b_q, att_q, fch_act_q;  // quantized copies (elementwise sites)
    const T* att_used(const ElementwiseSites& e) const { return e.active(softmax) ? att_q.data() : att.data(); }
    const T* act_used(const ElementwiseSites& e) const { return e.active(acts.out) ? fch_act_q.data() : fch_act.data(); }
  };

 public:
  AttnModel(const ModelConfig& c, uint64_t seed) {
    this->cfg = c;
    if (c.heads == 0 || c.d_model % c.heads) throw std::invalid_argument("d_model must be a multiple of heads");
    auto& tb = this->table;
    const size_t C = c.d_model, F = c.mlp_mult * c.d_model;
    tb.add("wte", {c.vocab, C});
    tb.add("wpe", {c.context, C});
    blocks_.resize(c.layers);
    for (size_t l = 0; l < c.layers; ++l) {
      const std::string n = "block" + std::to_string(l);
      tb.add(n + ".ln1.w", {C}, false);
      tb.add(n + ".ln1.b", {C}, false);
      tb.add(n + ".attn.qkv.w", {3 * C, C});
      tb.add(n + ".attn.qkv.b", {3 * C}, false);
      tb.add(n + ".attn.proj.w", {C, C});
      tb.add(n + ".attn.proj.b", {C}, false);
      tb.add(n + ".ln2.w", {C}, false);
      tb.add(n + ".ln2.b", {C}, false);
      tb.add(n + ".mlp.fc.w", {F, C});
      tb.add(n + ".mlp.fc.b", {F}, false);
      tb.add(n + ".mlp.proj.w", {C, F});
      tb.add(n + ".mlp.proj.b", {C}, false);
      Block& bk = blocks_[l];
      bk.qkv = this->sites.add_linear(n + ".attn.qkv");
      bk.score = this->sites.add_bilinear(n + ".attn.score");
      bk.value = this->sites.add_bilinear(n + ".attn.value");
      bk.proj = this->sites.add_linear(n + ".attn.proj");
      bk.fc = this->sites.add_linear(n + ".mlp.fc");
      bk.fc2 = this->sites.add_linear(n + ".mlp.proj");
      bk.ln1s = this->elementwise.add_layernorm(n + ".ln1");
      bk.softmax = this->elementwise.add(n + ".attn", ElemTensor::softmax);
      bk.ln2s = this->elementwise.add_layernorm(n + ".ln2");
      bk.acts = this->elementwise.add_activation(n + ".mlp");
    }
    tb.add("ln_f.w", {C}, false);
    tb.add("ln_f.b", {C}, false);
    tb.add("head.w", {c.vocab, C});
    head_ = this->sites.add_linear("head");
    lnf_sites_ = this->elementwise.add_layernorm("ln_f");
    finish_table(*this);
    const double sd = 0.02, sd_proj = 0.02 / std::sqrt(2.0 * static_cast<double>(std::max<size_t>(c.layers, 1)));
    for (const auto& p : this->table.specs) {
      const std::string& n = p.name;
      const bool ln = n.find("ln") != std::string::npos;
      const bool is_b = n.size() > 2 && n.compare(n.size() - 2, 2, ".b") == 0;
      if (ln && !is_b)
        init_param(*this, n, 0.0, seed, 1.0);
      else if (is_b)
        init_param(*this, n, 0.0, seed);
      else if (n.find(".proj.w") != std::string::npos)
        init_param(*this, n, sd_proj, seed);
      else
        init_param(*this, n, sd, seed);
    }
  }

  size_t predictions(size_t b) const override { return b * this->cfg.context; }
  const std::vector<T>& last_logits() const override { return logits_; }

  double forward(const int32_t* windows, size_t b) override {
    const auto& c = this->cfg;
    b_ = b;
    const size_t t = c.context, C = c.d_model, F = c.mlp_mult * C, v = c.vocab, nh = c.heads, n = b * t;
    auto& e = this->elementwise;
    const bool gelu = c.activation == "gelu";
    tokens_.resize(n);
    targets_.resize(n);
    for (size_t i = 0; i < b; ++i)
      for (size_t j = 0; j < t; ++j) {
        tokens_[i * t + j] = windows[i * (t + 1) + j];
        targets_[i * t + j] = windows[i * (t + 1) + j + 1];
      }
    x0_.resize(n * C);
    embedding_forward(x0_.data(), tokens_.data(), this->param("wte"), n, C);
    const T* wpe = this->param("wpe");
    for (size_t i = 0; i < b; ++i)
      for (size_t j = 0; j < t; ++j)
        for (size_t k = 0; k < C; ++k) x0_[(i * t + j) * C + k] += wpe[j * C + k];
    const T* x = x0_.data();
    for (size_t l = 0; l < c.layers; ++l) {
      Block& bk = blocks_[l];
      const std::string p = "block" + std::to_string(l);
      bk.ln1.resize(n * C), bk.ln1_mean.resize(n), bk.ln1_rstd.resize(n);
      bk.qkv_out.resize(n * 3 * C), bk.att.resize(b * nh * t * t), bk.atty.resize(n * C);
      bk.res2.resize(n * C), bk.ln2.resize(n * C), bk.ln2_mean.resize(n), bk.ln2_rstd.resize(n);
      bk.fch.resize(n * F), bk.fch_act.resize(n * F), bk.res3.resize(n * C);
      layernorm_q_forward(e, bk.ln1s, bk.ln1.data(), bk.ln1_mean.data(), bk.ln1_rstd.data(), x,
                          this->param(p + ".ln1.w"), this->param(p + ".ln1.b"), n, C, bk.ln1w_q, bk.ln1b_q);
      linear_forward(this->sites, bk.qkv, bk.qkv_out.data(), bk.ln1.data(), this->param(p + ".attn.qkv.w"),
                     this->param(p + ".attn.qkv.b"), n, C, 3 * C);
      attention_probs_forward(this->sites, bk.score, bk.att.data(), bk.qkv_out.data(), b, t, C, nh);
      const T* att = e.quantized(bk.softmax, static_cast<const T*>(bk.att.data()), b * nh * t, t, bk.att_q);
      attention_values_forward(this->sites, bk.value, bk.atty.data(), att, bk.qkv_out.data(), b, t, C, nh);
      linear_forward(this->sites, bk.proj, bk.res2.data(), bk.atty.data(), this->param(p + ".attn.proj.w"),
                     this->param(p + ".attn.proj.b"), n, C, C);
      for (size_t i = 0; i < n * C; ++i) bk.res2[i] += x[i];
      layernorm_q_forward(e, bk.ln2s, bk.ln2.data(), bk.ln2_mean.data(), bk.ln2_rstd.data(), bk.res2.data(),
                          this->param(p + ".ln2.w"), this->param(p + ".ln2.b"), n, C, bk.ln2w_q, bk.ln2b_q);
      linear_forward(this->sites, bk.fc, bk.fch.data(), bk.ln2.data(), this->param(p + ".mlp.fc.w"),
                     this->param(p + ".mlp.fc.b"), n, C, F);
      const T* act = activation_q_forward(e, bk.acts, gelu, bk.fch_act.data(), bk.fch.data(), n, F, bk.fch_act_q);
      linear_forward(this->sites, bk.fc2, bk.res3.data(), act, this->param(p + ".mlp.proj.w"),
                     this->param(p + ".mlp.proj.b"), n, F, C);
      for (size_t i = 0; i < n * C; ++i) bk.res3[i] += bk.res2[i];
      x = bk.res3.data();
    }
    lnf_.resize(n * C), lnf_mean_.resize(n), lnf_rstd_.resize(n);
    layernorm_q_forward(e, lnf_sites_, lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, this->param("ln_f.w"),
                        this->param("ln_f.b"), n, C, lnfw_q_, lnfb_q_);
    logits_.resize(n * v), probs_.resize(n * v), losses_.resize(n);
    linear_forward(this->sites, head_, logits_.data(), lnf_.data(), this->param("head.w"), static_cast<const T*>(nullptr),
                   n, C, v);
    return crossentropy_forward(probs_.data(), losses_.data(), logits_.data(), targets_.data(), n, v);
  }

  void backward_grads() override {
    const auto& c = this->cfg;
    const size_t b = b_, t = c.context, C = c.d_model, F = c.mlp_mult * C, v = c.vocab, nh = c.heads, n = b * t;
    const auto& e = this->elementwise;
    dlogits_.resize(n * v);
    crossentropy_backward(dlogits_.data(), probs_.data(), targets_.data(), n, v, this->loss_scale);
    dlnf_.resize(n * C);
    linear_backward(this->sites, head_, dlnf_.data(), this->grad_product("head.w"), static_cast<T*>(nullptr),
                    dlogits_.data(), lnf_.data(), this->param("head.w"), n, C, v);
    // dres: gradient flowing along the residual stream (into the current block's output)
    dres_.assign(n * C, T(0));
    const T* xlast = c.layers ? blocks_[c.layers - 1].res3.data() : x0_.data();
    layernorm_backward(dres_.data(), this->grad("ln_f.w"), this->grad("ln_f.b"), dlnf_.data(), xlast,
                       layernorm_weight_used(e, lnf_sites_, this->param("ln_f.w"), lnfw_q_), lnf_mean_.data(),
                       lnf_rstd_.data(), n, C);
    dtmp_.resize(n * C), dfch_.resize(n * F), dfch_pre_.resize(n * F), dqkv_.resize(n * 3 * C), datt_.resize(t * t);
    dln_.resize(n * C);
    for (size_t l = c.layers; l-- > 0;) {
      Block& bk = blocks_[l];
      const std::string p = "block" + std::to_string(l);
      const T* xin = l ? blocks_[l - 1].res3.data() : x0_.data();
      // res3 = res2 + proj(act(fc(ln2(res2))))
      linear_backward(this->sites, bk.fc2, dfch_.data(), this->grad_product(p + ".mlp.proj.w"),
                      this->grad(p + ".mlp.proj.b"), dres_.data(), bk.act_used(e), this->param(p + ".mlp.proj.w"),
                      n, F, C);
      activation_backward(c.activation == "gelu", dfch_pre_.data(), dfch_.data(), bk.fch.data(), bk.fch_act.data(),
                          n * F);
      linear_backward(this->sites, bk.fc, dln_.data(), this->grad_product(p + ".mlp.fc.w"), this->grad(p + ".mlp.fc.b"),
                      dfch_pre_.data(), bk.ln2.data(), this->param(p + ".mlp.fc.w"), n, C, F);
      layernorm_backward(dres_.data(), this->grad(p + ".ln2.w"), this->grad(p + ".ln2.b"), dln_.data(), bk.res2.data(),
                         layernorm_weight_used(e, bk.ln2s, this->param(p + ".ln2.w"), bk.ln2w_q), bk.ln2_mean.data(),
                         bk.ln2_rstd.data(), n, C);
      // res2 = x + proj(attn(qkv(ln1(x))))
      linear_backward(this->sites, bk.proj, dtmp_.data(), this->grad_product(p + ".attn.proj.w"),
                      this->grad(p + ".attn.proj.b"), dres_.data(), bk.atty.data(), this->param(p + ".attn.proj.w"),
                      n, C, C);
      attention_backward(this->sites, bk.score, bk.value, dqkv_.data(), datt_.data(), dtmp_.data(), bk.qkv_out.data(),
                         bk.att.data(), b, t, C, nh, bk.att_used(e));
      linear_backward(this->sites, bk.qkv, dln_.data(), this->grad_product(p + ".attn.qkv.w"),
                      this->grad(p + ".attn.qkv.b"), dqkv_.data(), bk.ln1.data(), this->param(p + ".attn.qkv.w"),
                      n, C, 3 * C);
      layernorm_backward(dres_.data(), this->grad(p + ".ln1.w"), this->grad(p + ".ln1.b"), dln_.data(), xin,
                         layernorm_weight_used(e, bk.ln1s, this->param(p + ".ln1.w"), bk.ln1w_q), bk.ln1_mean.data(),
                         bk.ln1_rstd.data(), n, C);
    }
    embedding_backward(this->grad("wte"), dres_.data(), tokens_.data(), n, C);
    T* dwpe = this->grad("wpe");
    for (size_t i = 0; i < b; ++i)
      for (size_t j = 0; j < t; ++j)
        for (size_t k = 0; k < C; ++k) dwpe[j * C + k] += dres_[(i * t + j) * C + k];
  }

 private:
  std::vector<Block> blocks_;
  LinearSites head_;
  LayerNormSites lnf_sites_;
  size_t b_ = 0;
  std::vector<int32_t> tokens_, targets_;
  std::vector<T> x0_, lnf_, lnf_mean_, lnf_rstd_, lnfw_q_, lnfb_q_, logits_, probs_, losses_;
  std::vector<T> dlogits_, dlnf_, dres_, dtmp_, dfch_, dfch_pre_, dqkv_, datt_, dln_;
};

}  // namespace

template <typename T>
std::unique_ptr<Model<T>> make_attn_model(const ModelConfig& cfg, uint64_t seed) {
  return std::make_unique<AttnModel<T>>(cfg, seed);
}

template std::unique_ptr<Model<float>> make_attn_model<float>(const ModelConfig&, uint64_t);
template std::unique_ptr<Model<double>> make_attn_model<double>(const ModelConfig&, uint64_t);

}  // namespace drift
