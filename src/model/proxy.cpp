// proxy: the synthetic student-teacher residual MLP with LayerNorm that the MX-instability
// literature trains as a small stand-in for a transformer (Gaussian inputs, a fixed random teacher,
// MSE loss): no text, and every piece the instability is blamed on (LayerNorm affine weights near 1
// under block quantization, residual growth) in a few lines.
//
// Student (every matmul through the engine at its site; LayerNorms and the activation under
// precision.elementwise), model.student = "projected" (the default):
//   h0 = input(x)                                      x (B, input_dim) -> (B, D)      site "input"
//   h_{l+1} = h_l + proj(act(fc(LN_l(h_l))))           fc (D -> F = mlp_mult D), proj (F -> D)
//                                                      sites block<l>.mlp.fc, block<l>.mlp.proj;
//                                                      LayerNorm block<l>.ln, activation block<l>.mlp
//   y_hat = head(LN_f(h_L))                            (B, output_dim)                 site "head", LayerNorm ln_f
//   loss = mean over B x output_dim of (y_hat - y)^2
// model.student = "bare" (the paper's ResidualMLP, Su et al. 2025): no input layer, no ln_f, no head:
//   h0 = x (B, D), the same blocks, y_hat = h_L (input_dim = output_dim = D).
// model.fc_bias = false drops fc's bias (the paper's fc1 has none; proj keeps its bias).
// Teacher, model.teacher = "projected" (the default): the projected architecture with its own fixed
// weights (no biases, LayerNorms without affine weights); "mlp" (the paper's make_teacher): a plain
// stack of teacher_depth blocks x -> act(x W1^T) W2^T, W1 (teacher_width, input_dim), W2 (input_dim,
// teacher_width), no residual, no LayerNorm, no biases. Its weights are drawn from model.teacher_seed
// and not from the run's seed, so that a seed sweep varies the student's initialisation, data and
// rounding but not the task. It is the data generator: it runs in double with plain loops, outside
// every precision policy, on the inputs as the student sees them (rounded to T); with
// model.label_noise, a training batch's targets get label_noise * N(0, 1) added (in double, drawn
// from the run's seed on the noise stream the trainer names), and are then rounded to T.
// Init, model.init = "normal" (the default): every weight (student and teacher) N(0, 1/fan_in) (times
// model.init_scale for the student), biases 0; "torch_uniform" (torch nn.Linear's default,
// kaiming_uniform with a = sqrt(5)): every weight and linear bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
// (fan_in of its layer; times init_scale for the student). Either way γ = 1, β = 0. With the
// projected teacher the LayerNorm output has unit variance per feature and the head rows about unit
// norm, so the targets have about unit variance: predicting 0 scores about 1.
// Inputs: x[i] = normal_draw(seed, stream, draw * B * input_dim + i), i over the batch row-major;
// the trainer's train and validation streams (train/data.h) keep the held-out batches apart; the
// label noise of target i is normal_draw(seed, noise stream, draw * B * output_dim + i).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "arith/dense_f64.h"
#include "arith/parallel.h"
#include "model/init.h"
#include "model/layers.h"
#include "model/model.h"

namespace drift {

namespace {

using model_init::finish_table;
using model_init::init_param;
using model_init::init_param_uniform;

constexpr uint64_t kTeacherStream = 0x7eac0000;  // + teacher tensor index

struct Teacher {
  size_t din = 0, d = 0, f = 0, o = 0, layers = 0;
  bool gelu = false, mlp = false;
  DenseF64Weights w_in, w_out;  // transposed: (fan_in, out)
  std::vector<DenseF64Weights> w1, w2;
  // forward()'s activations, kept from call to call: at a study size they are megabytes each, and
  // fresh ones cost the kernel's page faults and their zeroing every batch. (A model is driven by
  // one caller at a time; its own forward() writes its state too.)
  struct Workspace {
    std::vector<double> h, a, u, v, r, mean, rstd;
    std::vector<double> inputs, targets;  // the batch in double, for ProxyModel::draw_batch
  };
  mutable Workspace work;
  std::vector<double> ln_weight, ln_bias;  // the LayerNorms' fixed affine: 1 and 0 (d each)

  explicit Teacher(const ModelConfig& c)
      : din(c.input_dim), d(c.d_model), f(c.mlp_mult * c.d_model), o(c.output_dim), layers(c.layers),
        gelu(c.activation == "gelu"), mlp(c.teacher == "mlp") {
    uint64_t index = 0;
    const bool uniform = c.init == "torch_uniform";
    // A weight (out x fan_in), element i of its draws at row-major position i, kept transposed
    // (fan_in x out) for dense_f64 (arith/dense_f64.h: a triple loop's sequential sums, vectorised
    // across outputs; in double the teacher would otherwise cost more than the student it labels for).
    auto draw = [&](size_t out, size_t fan_in) {
      std::vector<double> wt(out * fan_in);
      const double sd = 1.0 / std::sqrt(static_cast<double>(fan_in));
      const uint64_t stream = kTeacherStream + index;
      for (size_t r = 0; r < out; ++r)
        for (size_t k = 0; k < fan_in; ++k) {
          const uint64_t i = r * fan_in + k;
          wt[k * out + r] = sd * (uniform ? uniform_draw(c.teacher_seed, stream, i) : normal_draw(c.teacher_seed, stream, i));
        }
      ++index;
      return DenseF64Weights(std::move(wt), fan_in, out);
    };
    if (mlp) {
      f = c.teacher_width ? c.teacher_width : c.d_model;
      layers = c.teacher_depth ? c.teacher_depth : c.layers;
      for (size_t l = 0; l < layers; ++l) {
        w1.push_back(draw(f, din));
        w2.push_back(draw(din, f));
      }
      return;
    }
    ln_weight.assign(d, 1.0);
    ln_bias.assign(d, 0.0);
    w_in = draw(d, din);
    for (size_t l = 0; l < layers; ++l) {
      w1.push_back(draw(f, d));
      w2.push_back(draw(d, f));
    }
    w_out = draw(o, d);
  }

  // The weights as the paper's torch modules hold them, (out, in), named after their layers.
  std::vector<GeneratorTensor> tensors() const {
    std::vector<GeneratorTensor> out;
    auto add = [&](const std::string& name, const DenseF64Weights& wt, size_t fan_in, size_t n_out) {
      std::vector<double> w(n_out * fan_in);
      for (size_t r = 0; r < n_out; ++r)
        for (size_t k = 0; k < fan_in; ++k) w[r * fan_in + k] = wt.w[k * n_out + r];
      out.push_back({"teacher." + name, {n_out, fan_in}, std::move(w)});
    };
    const size_t width = mlp ? din : d;
    if (!mlp) add("input.w", w_in, din, d);
    for (size_t l = 0; l < layers; ++l) {
      const std::string p = "block" + std::to_string(l) + ".mlp.";
      add(p + "fc.w", w1[l], width, f);
      add(p + "proj.w", w2[l], f, width);
    }
    if (!mlp) add("head.w", w_out, d, o);
    return out;
  }

  void act(double* v, const double* u, size_t n) const {
    if (gelu)
      gelu_forward(v, u, n);
    else
      tanh_forward(v, u, n);
  }

  // y (B, o) from x (B, din).
  void forward(double* y, const double* x, size_t b) const {
    auto &h = work.h, &a = work.a, &u = work.u, &v = work.v, &r = work.r, &mean = work.mean, &rstd = work.rstd;
    if (mlp) {
      h.assign(x, x + b * din);
      u.resize(b * f);
      v.resize(b * f);
      for (size_t l = 0; l < layers; ++l) {
        dense_f64(u.data(), h.data(), w1[l], b);
        act(v.data(), u.data(), b * f);
        dense_f64(h.data(), v.data(), w2[l], b);
      }
      std::copy(h.begin(), h.end(), y);
      return;
    }
    for (auto* buf : {&h, &a, &r}) buf->resize(b * d);
    for (auto* buf : {&u, &v}) buf->resize(b * f);
    mean.resize(b);
    rstd.resize(b);
    dense_f64(h.data(), x, w_in, b);
    for (size_t l = 0; l < layers; ++l) {
      layernorm_forward(a.data(), mean.data(), rstd.data(), h.data(), ln_weight.data(), ln_bias.data(), b, d);
      dense_f64(u.data(), a.data(), w1[l], b);
      act(v.data(), u.data(), b * f);
      dense_f64(r.data(), v.data(), w2[l], b);
      for (size_t i = 0; i < b * d; ++i) h[i] += r[i];
    }
    layernorm_forward(a.data(), mean.data(), rstd.data(), h.data(), ln_weight.data(), ln_bias.data(), b, d);
    dense_f64(y, a.data(), w_out, b);
  }
};

// What makes a proxy ModelConfig impossible, as one sentence (empty: nothing). The config layer
// reports these first under the key's name; the model's constructor throws them.
std::string proxy_config_error(const ModelConfig& c) {
  if (c.input_dim == 0 || c.output_dim == 0 || c.d_model == 0 || c.mlp_mult == 0)
    return "proxy: input_dim, output_dim, d_model and mlp_mult must be positive";
  if (c.student == "bare" && (c.input_dim != c.d_model || c.output_dim != c.d_model))
    return "proxy: the bare student needs input_dim = output_dim = d_model (x is the residual stream)";
  if (c.teacher == "mlp" && c.output_dim != c.input_dim)
    return "proxy: the mlp teacher maps input_dim to input_dim, so output_dim must equal input_dim";
  return "";
}

template <typename T>
class ProxyModel final : public Model<T> {
  struct Block {
    LinearSites fc, proj;
    LayerNormSites ln;
    ActivationSites act;
    std::vector<T> lnout, mean, rstd, lnw_q, lnb_q, pre, out, out_q;
  };

 public:
  ProxyModel(const ModelConfig& c, uint64_t seed)
      : teacher_((check(c), c)), seed_(seed), bare_(c.student == "bare"), gelu_(c.activation == "gelu") {
    this->cfg = c;
    auto& tb = this->table;
    auto& e = this->elementwise;
    const size_t din = c.input_dim, D = c.d_model, F = c.mlp_mult * D, O = c.output_dim;
    if (!bare_) {
      tb.add("input.w", {D, din});
      tb.add("input.b", {D}, false);
      in_ = this->sites.add_linear("input");
    }
    blocks_.resize(c.layers);
    for (size_t l = 0; l < c.layers; ++l) {
      const std::string n = "block" + std::to_string(l);
      tb.add(n + ".ln.w", {D}, false);
      tb.add(n + ".ln.b", {D}, false);
      tb.add(n + ".mlp.fc.w", {F, D});
      if (c.fc_bias) tb.add(n + ".mlp.fc.b", {F}, false);
      tb.add(n + ".mlp.proj.w", {D, F});
      tb.add(n + ".mlp.proj.b", {D}, false);
      Block& bk = blocks_[l];
      bk.ln = e.add_layernorm(n + ".ln");
      bk.fc = this->sites.add_linear(n + ".mlp.fc");
      bk.act = e.add_activation(n + ".mlp");
      bk.proj = this->sites.add_linear(n + ".mlp.proj");
    }
    if (!bare_) {
      tb.add("ln_f.w", {D}, false);
      tb.add("ln_f.b", {D}, false);
      tb.add("head.w", {O, D});
      tb.add("head.b", {O}, false);
      lnf_ = e.add_layernorm("ln_f");
      head_ = this->sites.add_linear("head");
    }
    finish_table(*this);
    const bool uniform = c.init == "torch_uniform";
    auto ends_with = [](const std::string& n, const char* tail) {
      const size_t k = std::char_traits<char>::length(tail);
      return n.size() >= k && n.compare(n.size() - k, k, tail) == 0;
    };
    for (const auto& p : this->table.specs) {
      const std::string& n = p.name;
      const bool layernorm = n == "ln_f.w" || n == "ln_f.b" || ends_with(n, ".ln.w") || ends_with(n, ".ln.b");
      // A linear layer's fan_in: its weight's second dimension (a bias X.b belongs to X.w).
      auto fan_in = [&] {
        return static_cast<double>(p.shape.size() == 2 ? p.shape[1]
                                                       : this->table.find(n.substr(0, n.size() - 1) + "w")->shape[1]);
      };
      if (layernorm)
        init_param(*this, n, 0.0, seed, ends_with(n, ".w") ? 1.0 : 0.0);
      else if (uniform)
        init_param_uniform(*this, n, 1.0 / std::sqrt(fan_in()), seed);
      else if (p.shape.size() == 1)
        init_param(*this, n, 0.0, seed);
      else
        init_param(*this, n, 1.0 / std::sqrt(fan_in()), seed);
    }
  }

  size_t predictions(size_t b) const override { return b; }
  // The regression outputs take the logits' place in diagnostics (forward deviation).
  const std::vector<T>& last_logits() const override { return pred_; }

  double forward(const int32_t*, size_t) override {
    throw std::logic_error("the proxy model draws its own inputs: call forward_generated");
  }

  typename Model<T>::GeneratedBatch generated_batch(uint64_t stream, uint64_t draw, size_t b,
                                                      std::optional<uint64_t> noise_stream) const override {
    typename Model<T>::GeneratedBatch g;
    draw_batch(stream, draw, b, noise_stream, g.inputs, g.targets, &g.noise);
    return g;
  }

  std::vector<GeneratorTensor> generator_weights() const override { return teacher_.tensors(); }

  double forward_generated(uint64_t stream, uint64_t draw, size_t b, std::optional<uint64_t> noise_stream) override {
    const auto& c = this->cfg;
    auto& e = this->elementwise;
    const size_t din = c.input_dim, D = c.d_model, F = c.mlp_mult * D, O = c.output_dim, L = c.layers;
    b_ = b;
    draw_batch(stream, draw, b, noise_stream, x_, y_, nullptr);

    h_.resize(L + 1);
    if (bare_)
      h_[0] = x_;
    else {
      h_[0].resize(b * D);
      linear_forward(this->sites, in_, h_[0].data(), x_.data(), this->param("input.w"), this->param("input.b"), b, din, D);
    }
    for (size_t l = 0; l < L; ++l) {
      Block& bk = blocks_[l];
      const std::string p = "block" + std::to_string(l);
      bk.lnout.resize(b * D), bk.mean.resize(b), bk.rstd.resize(b), bk.pre.resize(b * F), bk.out.resize(b * F);
      layernorm_q_forward(e, bk.ln, bk.lnout.data(), bk.mean.data(), bk.rstd.data(), h_[l].data(),
                          this->param(p + ".ln.w"), this->param(p + ".ln.b"), b, D, bk.lnw_q, bk.lnb_q);
      linear_forward(this->sites, bk.fc, bk.pre.data(), bk.lnout.data(), this->param(p + ".mlp.fc.w"), fc_bias(l, false),
                     b, D, F);
      const T* a = activation_q_forward(e, bk.act, gelu_, bk.out.data(), bk.pre.data(), b, F, bk.out_q);
      h_[l + 1].resize(b * D);
      linear_forward(this->sites, bk.proj, h_[l + 1].data(), a, this->param(p + ".mlp.proj.w"),
                     this->param(p + ".mlp.proj.b"), b, F, D);
      for (size_t i = 0; i < b * D; ++i) h_[l + 1][i] += h_[l][i];
    }
    if (bare_) {
      pred_ = h_[L];
    } else {
      z_.resize(b * D), zmean_.resize(b), zrstd_.resize(b);
      layernorm_q_forward(e, lnf_, z_.data(), zmean_.data(), zrstd_.data(), h_[L].data(), this->param("ln_f.w"),
                          this->param("ln_f.b"), b, D, lnfw_q_, lnfb_q_);
      pred_.resize(b * O);
      linear_forward(this->sites, head_, pred_.data(), z_.data(), this->param("head.w"), this->param("head.b"), b, D, O);
    }
    return mse_forward(pred_.data(), y_.data(), b, O);
  }

  void backward_grads() override {
    const auto& c = this->cfg;
    auto& e = this->elementwise;
    const size_t b = b_, din = c.input_dim, D = c.d_model, F = c.mlp_mult * D, O = c.output_dim, L = c.layers;
    dpred_.resize(b * O);
    mse_backward(dpred_.data(), pred_.data(), y_.data(), b, O, this->loss_scale);
    if (bare_) {
      dres_ = dpred_;  // the prediction is the residual stream
    } else {
      dz_.resize(b * D);
      linear_backward(this->sites, head_, dz_.data(), this->grad_product("head.w"), this->grad("head.b"), dpred_.data(),
                      z_.data(), this->param("head.w"), b, D, O);
      dres_.assign(b * D, T(0));  // the gradient along the residual stream
      layernorm_backward(dres_.data(), this->grad("ln_f.w"), this->grad("ln_f.b"), dz_.data(), h_[L].data(),
                         layernorm_weight_used(e, lnf_, this->param("ln_f.w"), lnfw_q_), zmean_.data(), zrstd_.data(),
                         b, D);
    }
    dact_.resize(b * F), dpre_.resize(b * F), dln_.resize(b * D);
    for (size_t l = L; l-- > 0;) {
      Block& bk = blocks_[l];
      const std::string p = "block" + std::to_string(l);
      const T* a = e.active(bk.act.out) ? bk.out_q.data() : bk.out.data();
      linear_backward(this->sites, bk.proj, dact_.data(), this->grad_product(p + ".mlp.proj.w"),
                      this->grad(p + ".mlp.proj.b"), dres_.data(), a, this->param(p + ".mlp.proj.w"), b, F, D);
      activation_backward(gelu_, dpre_.data(), dact_.data(), bk.pre.data(), bk.out.data(), b * F);
      linear_backward(this->sites, bk.fc, dln_.data(), this->grad_product(p + ".mlp.fc.w"), fc_bias(l, true),
                      dpre_.data(), bk.lnout.data(), this->param(p + ".mlp.fc.w"), b, D, F);
      layernorm_backward(dres_.data(), this->grad(p + ".ln.w"), this->grad(p + ".ln.b"), dln_.data(), h_[l].data(),
                         layernorm_weight_used(e, bk.ln, this->param(p + ".ln.w"), bk.lnw_q), bk.mean.data(),
                         bk.rstd.data(), b, D);
    }
    // The inputs need no gradient: only the input layer's weight gradient (its grad_input site is never called).
    if (!bare_)
      linear_backward(this->sites, in_, static_cast<T*>(nullptr), this->grad_product("input.w"), this->grad("input.b"),
                      dres_.data(), x_.data(), this->param("input.w"), b, din, D);
  }

 private:
  // The batch of (stream, draw): inputs as T, the teacher's targets from exactly those inputs (plus
  // label noise with a noise stream, each target's in `noise` when given), rounded once to T.
  void draw_batch(uint64_t stream, uint64_t draw, size_t b, std::optional<uint64_t> noise_stream, std::vector<T>& x,
                  std::vector<T>& y, std::vector<double>* noise) const {
    const auto& c = this->cfg;
    const size_t din = c.input_dim, O = c.output_dim;
    x.resize(b * din);
    std::vector<double>& xd = teacher_.work.inputs;
    std::vector<double>& yd = teacher_.work.targets;
    xd.resize(b * din);
    yd.resize(b * O);
    auto as_data = [&](double v) { return this->float_data ? static_cast<T>(static_cast<float>(v)) : static_cast<T>(v); };
    // (Each draw is its own counter's: a team splits a large batch's draws without changing a bit.)
    constexpr size_t kDrawChunk = 1024;
    for_each_chunk(b * din, kDrawChunk, b * din >= 8 * kDrawChunk, [&](size_t lo, size_t len) {
      for (size_t i = lo; i < lo + len; ++i) {
        x[i] = as_data(normal_draw(seed_, stream, draw * b * din + i));
        xd[i] = static_cast<double>(x[i]);
      }
    });
    teacher_.forward(yd.data(), xd.data(), b);
    if (noise) noise->assign(b * O, 0.0);
    if (noise_stream && c.label_noise > 0)
      for (size_t i = 0; i < b * O; ++i) {
        const double n = c.label_noise * normal_draw(seed_, *noise_stream, draw * b * O + i);
        yd[i] += n;
        if (noise) (*noise)[i] = n;
      }
    y.resize(b * O);
    for (size_t i = 0; i < b * O; ++i) y[i] = as_data(yd[i]);
  }

  static void check(const ModelConfig& c) {
    const std::string e = proxy_config_error(c);
    if (!e.empty()) throw std::invalid_argument(e);
  }
  // Block l's fc bias (its gradient when `grad`), or null when model.fc_bias is false.
  T* fc_bias(size_t l, bool grad) {
    if (!this->cfg.fc_bias) return nullptr;
    const std::string n = "block" + std::to_string(l) + ".mlp.fc.b";
    return grad ? this->grad(n) : this->param(n);
  }

  Teacher teacher_;
  uint64_t seed_;
  bool bare_, gelu_;
  std::vector<Block> blocks_;
  LinearSites in_, head_;
  LayerNormSites lnf_;
  size_t b_ = 0;
  std::vector<T> x_, y_, z_, zmean_, zrstd_, lnfw_q_, lnfb_q_, pred_;
  std::vector<std::vector<T>> h_;
  std::vector<T> dpred_, dz_, dres_, dact_, dpre_, dln_;
};

}  // namespace

template <typename T>
std::unique_ptr<Model<T>> make_proxy_model(const ModelConfig& cfg, uint64_t seed) {
  return std::make_unique<ProxyModel<T>>(cfg, seed);
}

template std::unique_ptr<Model<float>> make_proxy_model<float>(const ModelConfig&, uint64_t);
template std::unique_ptr<Model<double>> make_proxy_model<double>(const ModelConfig&, uint64_t);

}  // namespace drift
