#!/usr/bin/env python3
"""An independent reference for drift's models: the same architectures in PyTorch, trained from
drift's own starting point, with the backward pass left to torch autograd.

Check a run (drift train ... --dump-init, with train.log_every=1 and the fp32 passthrough policy):

    /usr/bin/python3 scripts/reference_pytorch.py --run RUNDIR [--run RUNDIR2 ...] [--steps 50] [--table] [--fp64]

loads RUNDIR/config.json, the initial weights RUNDIR/init/<param>.npy and the training windows
RUNDIR/init/batches.npy (the proxy model: the drawn inputs and targets RUNDIR/init/inputs.npy,
targets.npy, first checked against the dumped teacher weights and label noise, see below), trains
the same model with the same optimizer, learning-rate schedule and gradient clipping in float32,
and compares each step's training loss (and gradient norm) with RUNDIR/metrics.jsonl. Exit 0 when every step agrees within the tolerance below; exit 1 naming the
first step that does not; exit 2 for unusable input. --table prints every step; --fp64 also trains
in float64 and prints how far float32 (torch's and drift's) is from it, the scale the tolerance is
derived from.

Time the same models (the sizes of `drift bench train`: mlp, attn, proxy, proxy_study) in PyTorch float32:

    /usr/bin/python3 scripts/reference_pytorch.py --bench [--threads T] [--steps N] [--models M ...] [--json]

Use Debian's interpreter (/usr/bin/python3): Debian's python3-torch is installed for it only.

What drift computes and this file re-implements (src/model/model.cpp, layers.h, src/train/):
  mlp   x = concat(wte[tokens]) ; x = tanh(x W_l^T + b_l) per hidden layer ; logits = x W^T + b
  attn  x = wte[tok] + wpe ; per block: x += proj(attn(ln1(x))) ; x += fc2(act(fc(ln2(x)))) ;
        logits = head(ln_f(x)) (no bias). LayerNorm eps 1e-5 (biased variance), causal softmax of
        (Q K^T) * 1/sqrt(head size), act tanh or the tanh-approximate gelu.
  proxy student (model.student projected): h = input(x); h += mlp.proj(act(mlp.fc(LN(h)))) per block;
        y_hat = head(LN_f(h)); (bare, the paper's ResidualMLP): h = x, the same blocks, y_hat = h;
        mlp.fc without bias when model.fc_bias is false. The targets drift trained on must equal
        float32(teacher(x) + noise) with the teacher rebuilt here in float64 from init/teacher.*.npy
        (projected: the student's architecture without biases or affine LayerNorms; mlp: blocks
        h = act(h W1^T) W2^T), the noise init/label_noise.npy N(0, label_noise^2) and the validation
        targets noise-free; the initial weights must lie in torch's nn.Linear bounds (torch_uniform:
        kaiming_uniform a = sqrt(5)) or have N(0, 1/fan_in)'s spread (normal).
  loss  mean softmax cross-entropy; the logged loss is the mean of the fp32 per-prediction losses;
        proxy: F.mse_loss, the mean over batch x outputs of the squared errors.
  step  grad norm sqrt(sum g^2) in float64; clip factor grad_clip/norm when norm > grad_clip;
        AdamW  m = b1 m + (1-b1) g ; v = b2 v + (1-b2) g^2 ; p -= lr (m/c1 / (sqrt(v/c2) + eps) + wd p)
               with c1 = 1-b1^t, c2 = 1-b2^t, wd only on the weights (not biases, LayerNorm);
               (1-b computed from the rounded b, or with train.adam_one_minus_beta "fp64" in double and
               rounded once, as torch.optim.Adam does); the proxy with weight decay 0 and "fp64" trains
               with torch.optim.Adam itself (the paper's optimizer)
        SGD    g' = g + wd p (weights) ; m = mu m + g' ; p -= lr m
        lr     linear warmup lr (s+1)/warmup, then cosine/linear/constant to min_lr_frac lr (at the last
               step; cosine_torch: one step later, as CosineAnnealingLR(T_max = steps - warmup)).
"""

import argparse
import json
import math
import os
import sys
import time


def _blas_threads_from_argv():
    """--bench --threads T must hold for every library torch computes with, and OpenBLAS (Debian's
    torch does its matmuls through the system BLAS) reads its thread count from the environment
    when it loads, so it is set before torch is imported. An explicit environment setting wins."""
    argv = sys.argv[1:]
    threads = "1"
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            threads = argv[i + 1]
        elif a.startswith("--threads="):
            threads = a.split("=", 1)[1]
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, threads)


_blas_threads_from_argv()

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the CI test relies on this message and on the non-zero exit
    sys.stderr.write(
        "reference_pytorch.py: cannot import %s (%s). Install Debian's python3-torch and python3-numpy "
        "(scripts/setup.sh does) and run with /usr/bin/python3, the interpreter they are installed for.\n"
        % (e.name, e))
    sys.exit(2)


class InputProblem(Exception):
    """Unusable input: a missing file, a run this reference cannot replay. Exit 2."""


# ------------------------------------------------------------------------------------------------
# Tolerance of the comparison: |drift - torch| <= tol(step) * |torch|, for the loss and the
# gradient norm of every step.
#
# drift (fp32 passthrough) and this file compute the same real-number function in float32 and
# differ only in how they round: drift sums each matmul sequentially in k with one rounding per
# product-add (exact products), torch/BLAS in blocked, vectorised orders; drift's float tanh is its
# own (correctly rounded, src/arith/tanh_fp32.h), torch's its vectorised library's; exp and log come
# from different libms; softmax and LayerNorm sums run in other orders. Each difference is a few
# float32 ulps (2^-24 = 6e-8 relative) per value. At step 0 (same weights, same batch) the two
# losses then agree to about that; every later step starts from weights that differ by such
# roundings, and training amplifies them, slowly at these learning rates (AdamW normalises the
# update, clipping bounds it).
#
# Measured (torch 1.13 with OpenBLAS, x86-64, the three runs of tests/scripts/pytorch_reference.sh:
# mlp/AdamW, attn/AdamW/tanh, attn/SGD/gelu, 50 steps), largest relative gap over the 50 steps:
#   loss:      drift vs torch fp32  6.8e-8, 2.0e-8, 2.8e-8;  torch fp32 vs torch fp64  5.6e-8, 2.9e-8, 1.8e-8
#   grad norm: drift vs torch fp32  <= 1.1e-7
# so drift's float32 run is as far from the float64 trajectory as PyTorch's own float32 run is
# (--fp64 prints these; the test asserts it). Over 400 steps (mlp, lr 0.01) the gaps grow roughly
# linearly: ~2e-7 by step 100, ~1e-6 by step 200, at most 3.2e-6 (fp32 vs fp64) by step 400,
# i.e. about 1e-8 per step.
#
# The bound: 1e-6 (15x the largest gap at any of the first 50 steps) plus 5e-8 per step (5x the
# measured growth), doubled for the gradient norm (a sum over every gradient, and measured at up
# to 2x the loss gap). What real bugs do, measured by changing the reference (mlp / attn, first
# step over the bound): weight decay also on biases and LayerNorm: step 8 / 3 (1e-7..1e-5 by step
# 5, the subtlest tried); Adam eps 1e-8 -> 1e-6: 4 / 2; beta2 0.95 -> 0.99: 2 / 3; lr 1% high or
# the schedule one step early: step 1 (1e-4..1e-2).
TOL_STEP0 = 1e-6    # relative, at step 0
TOL_GROWTH = 5e-8   # relative, added per step


def loss_tolerance(step):
    return TOL_STEP0 + TOL_GROWTH * step


def grad_norm_tolerance(step):
    return 2 * loss_tolerance(step)


# ------------------------------------------------------------------------------------------------
# Models: functions of a dict of named leaf tensors (the names of drift's ParamTable).

def mlp_losses(P, cfg, windows):
    """windows (B, context+1) int64 -> per-window cross-entropy (B,)."""
    m = cfg["model"]
    ctx = m["context"]
    b = windows.shape[0]
    x = P["wte"][windows[:, :ctx]].reshape(b, ctx * m["embed"])
    for l in range(m["hidden_layers"]):
        x = torch.tanh(x @ P["hidden%d.w" % l].T + P["hidden%d.b" % l])
    logits = x @ P["head.w"].T + P["head.b"]
    return F.cross_entropy(logits, windows[:, ctx], reduction="none")


def attn_losses(P, cfg, windows):
    """windows (B, context+1) int64 -> per-position cross-entropy (B*context,)."""
    m = cfg["model"]
    t, c, nh = m["context"], m["d_model"], m["heads"]
    hs = c // nh
    b = windows.shape[0]
    dtype = P["wte"].dtype
    scale = torch.tensor(1.0, dtype=dtype) / torch.sqrt(torch.tensor(float(hs), dtype=dtype))
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    x = P["wte"][windows[:, :t]] + P["wpe"]  # (B,T,C)

    def ln(x, name):
        return F.layer_norm(x, (c,), P[name + ".w"], P[name + ".b"], eps=1e-5)

    def act(x):
        return F.gelu(x, approximate="tanh") if m["activation"] == "gelu" else torch.tanh(x)

    for l in range(m["layers"]):
        p = "block%d" % l
        qkv = ln(x, p + ".ln1") @ P[p + ".attn.qkv.w"].T + P[p + ".attn.qkv.b"]  # (B,T,3C): q | k | v
        q, k, v = (z.reshape(b, t, nh, hs).transpose(1, 2) for z in qkv.split(c, dim=-1))  # (B,H,T,hs)
        s = (q @ k.transpose(-2, -1)) * scale
        att = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + y @ P[p + ".attn.proj.w"].T + P[p + ".attn.proj.b"]
        h = act(ln(x, p + ".ln2") @ P[p + ".mlp.fc.w"].T + P[p + ".mlp.fc.b"])
        x = x + h @ P[p + ".mlp.proj.w"].T + P[p + ".mlp.proj.b"]
    logits = ln(x, "ln_f") @ P["head.w"].T
    return F.cross_entropy(logits.reshape(b * t, -1), windows[:, 1:].reshape(-1), reduction="none")


def proxy_losses(P, cfg, batch):
    """batch (inputs (B, input_dim), targets (B, output_dim)) -> squared errors (B*output_dim,)."""
    x, y = batch
    return F.mse_loss(proxy_forward(P, cfg["model"], x), y, reduction="none").reshape(-1)


MODELS = {"mlp": mlp_losses, "attn": attn_losses, "proxy": proxy_losses}


def param_names(cfg):
    """drift's ParamTable order, and which tensors take weight decay (ParamSpec.decay)."""
    m = cfg["model"]
    names = []
    if m["kind"] == "mlp":
        names.append(("wte", True))
        for l in range(m["hidden_layers"]):
            names += [("hidden%d.w" % l, True), ("hidden%d.b" % l, False)]
        names += [("head.w", True), ("head.b", False)]
    elif m["kind"] == "proxy":
        bare = m["student"] == "bare"
        if not bare:
            names += [("input.w", True), ("input.b", False)]
        for l in range(m["layers"]):
            p = "block%d" % l
            names += [(p + ".ln.w", False), (p + ".ln.b", False), (p + ".mlp.fc.w", True)]
            names += [(p + ".mlp.fc.b", False)] if m["fc_bias"] else []
            names += [(p + ".mlp.proj.w", True), (p + ".mlp.proj.b", False)]
        if not bare:
            names += [("ln_f.w", False), ("ln_f.b", False), ("head.w", True), ("head.b", False)]
    else:
        names += [("wte", True), ("wpe", True)]
        for l in range(m["layers"]):
            p = "block%d" % l
            names += [(p + ".ln1.w", False), (p + ".ln1.b", False), (p + ".attn.qkv.w", True),
                      (p + ".attn.qkv.b", False), (p + ".attn.proj.w", True), (p + ".attn.proj.b", False),
                      (p + ".ln2.w", False), (p + ".ln2.b", False), (p + ".mlp.fc.w", True),
                      (p + ".mlp.fc.b", False), (p + ".mlp.proj.w", True), (p + ".mlp.proj.b", False)]
        names += [("ln_f.w", False), ("ln_f.b", False), ("head.w", True)]
    return names


# ------------------------------------------------------------------------------------------------
# Optimizer and schedule, as src/train/optimizer.{h,cpp} define them.

def learning_rate(t, step):
    if t["warmup"] and step < t["warmup"]:
        return t["lr"] * (step + 1) / t["warmup"]
    if t["decay"] == "constant":
        return t["lr"]
    tail = 0 if t["decay"] == "cosine_torch" else 1  # torch's CosineAnnealingLR(T_max = steps - warmup)
    span = t["steps"] - t["warmup"] - tail if t["steps"] > t["warmup"] + tail else 1.0
    progress = min(1.0, (step - min(step, t["warmup"])) / span)
    lo = t["lr"] * t["min_lr_frac"]
    if t["decay"] == "linear":
        return t["lr"] - (t["lr"] - lo) * progress
    return lo + (t["lr"] - lo) * 0.5 * (1.0 + math.cos(math.pi * progress))


class Optimizer:
    """Element-wise updates in the working dtype; the scalars rounded to it first, as drift does."""

    def __init__(self, t, params, dtype):
        self.t, self.dtype, self.steps = t, dtype, 0
        self.m = {n: torch.zeros_like(p) for n, p in params.items()}
        self.v = {n: torch.zeros_like(p) for n, p in params.items()} if t["optimizer"] == "adamw" else None

    def scalar(self, x):
        return torch.tensor(x, dtype=torch.float64).to(self.dtype)

    @torch.no_grad()
    def step(self, params, decay, lr, grad_scale):
        self.steps += 1
        t = self.t
        s, flr, wd = self.scalar(grad_scale), self.scalar(lr), self.scalar(t["weight_decay"])
        if t["optimizer"] == "sgd":
            mu = self.scalar(t["momentum"])
            for n, p in params.items():
                g = p.grad * s
                if decay[n] and t["weight_decay"] != 0:
                    g = g + wd * p
                self.m[n] = mu * self.m[n] + g
                p -= flr * self.m[n]
            return
        b1, b2, eps = self.scalar(t["beta1"]), self.scalar(t["beta2"]), self.scalar(t["eps"])
        one = self.scalar(1.0)
        # train.adam_one_minus_beta: 1 - beta from the rounded beta in the working dtype, or in double
        # rounded once (as torch.optim.Adam passes it)
        fp64 = t.get("adam_one_minus_beta") == "fp64"
        omb1 = self.scalar(1.0 - t["beta1"]) if fp64 else one - b1
        omb2 = self.scalar(1.0 - t["beta2"]) if fp64 else one - b2
        c1 = self.scalar(1.0 - t["beta1"] ** self.steps)
        c2 = self.scalar(1.0 - t["beta2"] ** self.steps)
        for n, p in params.items():
            g = p.grad * s
            self.m[n] = b1 * self.m[n] + omb1 * g
            self.v[n] = b2 * self.v[n] + omb2 * (g * g)
            upd = (self.m[n] / c1) / (torch.sqrt(self.v[n] / c2) + eps)
            if decay[n]:
                upd = upd + wd * p
            p -= flr * upd


# ------------------------------------------------------------------------------------------------
# Replaying a run.

def load_run(run_dir, steps):
    def need(path):
        if not os.path.exists(path):
            raise InputProblem("%s: missing (run drift train with --dump-init and train.log_every=1)" % path)
        return path

    cfg = json.load(open(need(os.path.join(run_dir, "config.json"))))
    kind = cfg["model"]["kind"]
    if kind not in MODELS:
        raise InputProblem("%s/config.json: model.kind '%s' has no reference (mlp, attn, proxy)" % (run_dir, kind))
    prec = cfg["precision"]
    if prec["matmul"] not in ([], [{"preset": "fp32"}]) or prec["schedule"] or prec.get("elementwise"):
        raise InputProblem("%s/config.json: precision.matmul must be the fp32 passthrough ([] or the fp32 preset) "
                           "with no schedule; the reference trains in plain float32" % run_dir)
    init = os.path.join(run_dir, "init")
    params = {n: np.load(need(os.path.join(init, n + ".npy"))) for n, _ in param_names(cfg)}
    for n, a in params.items():
        if a.dtype != np.float32:
            raise InputProblem("%s: expected float32, found %s" % (os.path.join(init, n + ".npy"), a.dtype))
    if kind == "proxy":
        batches = load_proxy_data(init, cfg, need)
    else:
        batches = np.load(need(os.path.join(init, "batches.npy")))
        b, ctx = cfg["train"]["batch"], cfg["model"]["context"]
        if batches.dtype != np.int32 or batches.shape[1:] != (b, ctx + 1):
            raise InputProblem("%s: expected int32 (steps, %d, %d), found %s %s" %
                               (os.path.join(init, "batches.npy"), b, ctx + 1, batches.dtype, batches.shape))
    metrics = {}
    for line in open(need(os.path.join(run_dir, "metrics.jsonl"))):
        d = json.loads(line)
        metrics[d["step"]] = d
    if steps > min(len(batches[0] if kind == "proxy" else batches), cfg["train"]["steps"]):
        raise InputProblem("%s: --steps %d but the run has %d steps" % (run_dir, steps, cfg["train"]["steps"]))
    missing = [s for s in range(steps) if s not in metrics]
    if missing:
        raise InputProblem("%s/metrics.jsonl: no line for step %d (run with --set train.log_every=1 and at least "
                           "%d steps without stopping)" % (run_dir, missing[0], steps))
    return cfg, params, batches, metrics


class TorchAdam:
    """torch.optim.Adam itself, for runs that are Adam (AdamW without weight decay): the learning
    rate of each step set on the param group, or with train.decay "cosine_torch" and no warmup given
    by torch's own CosineAnnealingLR (and checked against drift's schedule); the clipping factor
    applied to the gradients first."""

    def __init__(self, t, params):
        self.opt = torch.optim.Adam(params.values(), lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                                    weight_decay=0)
        self.sched = None
        if t["decay"] == "cosine_torch" and t["warmup"] == 0:
            self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=t["steps"],
                                                                    eta_min=t["lr"] * t["min_lr_frac"])

    @torch.no_grad()
    def step(self, params, decay, lr, grad_scale):
        for g in self.opt.param_groups:
            if self.sched is None:
                g["lr"] = lr
            elif abs(g["lr"] - lr) > 1e-12 * lr:
                raise InputProblem("learning rate %r, torch's CosineAnnealingLR %r" % (lr, g["lr"]))
        if grad_scale != 1.0:
            for p in params.values():
                p.grad.mul_(grad_scale)
        self.opt.step()
        if self.sched is not None:
            self.sched.step()


def replay(cfg, params_np, batches, steps, dtype):
    """Trains `steps` steps from the dumped start; returns [(loss, grad_norm)] per step."""
    P = {n: torch.tensor(params_np[n], dtype=dtype).requires_grad_() for n, _ in param_names(cfg)}
    decay = dict(param_names(cfg))
    t = cfg["train"]
    kind = cfg["model"]["kind"]
    torch_adam = (kind == "proxy" and t["optimizer"] == "adamw" and t["weight_decay"] == 0 and
                  t.get("adam_one_minus_beta") == "fp64")
    opt = TorchAdam(t, P) if torch_adam else Optimizer(t, P, dtype)
    losses_fn = MODELS[kind]
    out = []
    for step in range(steps):
        for p in P.values():
            p.grad = None
        if kind == "proxy":  # the drawn inputs and targets, float32 values (exact in float64)
            batch = tuple(torch.tensor(a[step], dtype=dtype) for a in batches[:2])
        else:
            batch = torch.from_numpy(batches[step].astype(np.int64))
        losses = losses_fn(P, cfg, batch)
        losses.mean().backward()
        loss = float(losses.detach().double().mean())
        gnorm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in P.values()))
        scale = t["grad_clip"] / gnorm if t["grad_clip"] > 0 and gnorm > t["grad_clip"] else 1.0
        opt.step(P, decay, learning_rate(t, step), scale)
        out.append((loss, gnorm))
    return out


# ------------------------------------------------------------------------------------------------
# The proxy's data: drift draws it itself; --dump-init writes what it drew and the teacher.

PROXY_DATA = ("inputs", "targets", "val_inputs", "val_targets", "label_noise")


def load_proxy_data(init, cfg, need):
    """(inputs, targets, val_inputs, val_targets, noise, teacher) from init/, shapes checked; the
    student's tensors in init/ must be exactly param_names(cfg) (e.g. no fc bias when fc_bias is false)."""
    m, t = cfg["model"], cfg["train"]
    b = t["batch"]
    arrays = [np.load(need(os.path.join(init, n + ".npy"))) for n in PROXY_DATA]
    shapes = [(t["steps"], b, m["input_dim"]), (t["steps"], b, m["output_dim"]), (t["eval_batches"], b, m["input_dim"]),
              (t["eval_batches"], b, m["output_dim"]), (t["steps"] * b, m["output_dim"])]
    for n, a, shape in zip(PROXY_DATA, arrays, shapes):
        dtype = np.float64 if n == "label_noise" else np.float32
        if a.dtype != dtype or a.shape != shape:
            raise InputProblem("%s: expected %s %s, found %s %s" % (os.path.join(init, n + ".npy"), np.dtype(dtype).name,
                                                                    shape, a.dtype, a.shape))
    files = {f[:-4] for f in os.listdir(init) if f.endswith(".npy")}
    teacher = {f[len("teacher."):]: np.load(os.path.join(init, f + ".npy")) for f in files if f.startswith("teacher.")}
    student = files - set(PROXY_DATA) - {"teacher." + n for n in teacher}
    if student != {n for n, _ in param_names(cfg)}:
        raise InputProblem("%s: the student's tensors %s are not the model's %s" %
                           (init, sorted(student), sorted(n for n, _ in param_names(cfg))))
    return arrays[:4] + [arrays[4], teacher]


def init_problems(cfg, tensors, student):
    """Whether initial weights follow model.init: torch_uniform, every weight and linear bias inside
    torch's own nn.Linear bound (kaiming_uniform_ with a = sqrt(5): gain sqrt(3 / fan_in)) and, for
    tensors large enough to tell, filling it with U's variance; normal, N(0, 1/fan_in) spread and
    zero biases. LayerNorm gamma 1, beta 0. The student's bound or spread is times init_scale."""
    m = cfg["model"]
    scale = m["init_scale"] if student else 1.0
    gain = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5))
    out = []
    for n, a in tensors.items():
        a = np.asarray(a, dtype=np.float64)
        if n == "ln_f.w" or n.endswith(".ln.w") or n == "ln_f.b" or n.endswith(".ln.b"):
            if not (a == (1.0 if n.endswith(".w") else 0.0)).all():
                out.append("%s: LayerNorm %s not %s" % (n, "gamma" if n.endswith(".w") else "beta",
                                                        1 if n.endswith(".w") else 0))
            continue
        w = tensors[n[:-1] + "w"]
        fan_in = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(w.shape))[0]
        if m["init"] == "torch_uniform":
            bound = scale * (gain * math.sqrt(3.0 / fan_in) if a.ndim == 2 else 1.0 / math.sqrt(fan_in))
            big = np.abs(a).max()
            if big > bound * (1 + 1e-6) or (a.size >= 256 and (big < 0.9 * bound or
                                                                abs(a.var() / (bound * bound / 3) - 1) > 0.15)):
                out.append("%s: max |w| %.4g, variance %.4g, for U(-%.4g, %.4g) (variance %.4g)" %
                           (n, big, a.var(), bound, bound, bound * bound / 3))
        elif a.ndim == 1:
            if (a != 0).any():
                out.append("%s: a bias not initialised to 0" % n)
        elif a.size >= 256 and abs(a.std() / (scale / math.sqrt(fan_in)) - 1) > 0.15:
            out.append("%s: standard deviation %.4g, expected %.4g" % (n, a.std(), scale / math.sqrt(fan_in)))
    return out


def proxy_data_problems(cfg, params, data):
    """The batches drift trained and validated on against their definition: targets = float32(teacher(x)
    + noise), the teacher rebuilt here in float64; noise N(0, label_noise^2) on training targets only;
    the student's and the teacher's initial weights as model.init says."""
    m = cfg["model"]
    x, y, vx, vy, noise, teacher = data
    T = {n: torch.tensor(a, dtype=torch.float64) for n, a in teacher.items()}
    out = init_problems(cfg, params, True) + ["teacher " + p for p in init_problems(cfg, teacher, False)]

    def compare(name, inputs, targets, noise_added):
        ref = proxy_teacher(T, m, torch.tensor(inputs, dtype=torch.float64).reshape(-1, inputs.shape[-1]))
        ref = ref.numpy().reshape(targets.shape) + noise_added.reshape(targets.shape)
        # float32(ref) up to one float32 ulp: the two float64 teachers differ in their last bits only.
        gap = np.abs(targets.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-30)
        if not gap.max() <= 2.0 ** -23:
            i = np.unravel_index(np.argmax(gap), gap.shape)
            out.append("%s %s: drift %r, teacher(x) + noise here %r (relative gap %.2e)" %
                       (name, tuple(int(k) for k in i), float(targets[i]), float(ref[i]), gap[i]))

    compare("targets", x, y, noise)
    compare("val_targets", vx, vy, np.zeros(vy.shape))
    sigma = m["label_noise"]
    if sigma == 0:
        if (noise != 0).any():
            out.append("label_noise.npy: noise without model.label_noise")
    elif abs(noise.std() / sigma - 1) > 8 / math.sqrt(noise.size) + 0.01 or abs(noise.mean()) > 8 * sigma / math.sqrt(noise.size):
        out.append("label_noise.npy: mean %.3g, standard deviation %.4g, for N(0, %g^2)" % (noise.mean(), noise.std(), sigma))
    return out


def check_run(run, args):
    """Compares one run; prints its verdict (and table); returns 0 (agree) or 1 (disagree)."""
    cfg, params, batches, metrics = load_run(run, args.steps)
    kind = cfg["model"]["kind"]
    if kind == "proxy":
        problems = proxy_data_problems(cfg, params, batches)
        if problems:
            print("DISAGREE (proxy, %s): the drawn data or initial weights: %s" % (run, "; ".join(problems)))
            return 1
    ref = replay(cfg, params, batches, args.steps, torch.float32)
    ref64 = replay(cfg, params, batches, args.steps, torch.float64) if args.fp64 else None
    nan = float("nan")
    first_bad = None
    worst = (0.0, 0)
    if args.table:
        head = "%5s %14s %14s %10s %10s %14s %14s %10s %10s" % ("step", "drift loss", "torch loss", "rel diff", "tol",
                                                             "drift gnorm", "torch gnorm", "rel diff", "tol")
        if ref64:
            head += " %10s %10s" % ("t32-t64", "drift-t64")
        print("%s (%s)\n%s" % (run, cfg["model"]["kind"], head))
    for s in range(args.steps):
        dl, dg = metrics[s]["loss"], metrics[s]["grad_norm"]  # null when not finite
        tl, tg = ref[s]
        rl = abs(dl - tl) / abs(tl) if dl is not None else float("inf")
        rg = abs(dg - tg) / abs(tg) if dg is not None else float("inf")
        ok = rl <= loss_tolerance(s) and rg <= grad_norm_tolerance(s)
        worst = max(worst, (max(rl / loss_tolerance(s), rg / grad_norm_tolerance(s)), s))
        if not ok and first_bad is None:
            first_bad = s
        if args.table:
            row = "%5d %14.8f %14.8f %10.2e %10.1e %14.8f %14.8f %10.2e %10.1e" % (
                s, dl if dl is not None else nan, tl, rl, loss_tolerance(s), dg if dg is not None else nan, tg, rg,
                grad_norm_tolerance(s))
            if ref64:
                l64 = ref64[s][0]
                row += " %10.2e %10.2e" % (abs(tl - l64) / l64, abs(dl - l64) / l64 if dl is not None else nan)
            print(row + ("" if ok else "  <-- outside tolerance"))
    if ref64:
        def gap(a, b):
            return max(abs(a[s] - b[s]) / abs(b[s]) if a[s] is not None else float("inf") for s in range(args.steps))
        drift = [metrics[s]["loss"] for s in range(args.steps)]
        t32, t64 = [x[0] for x in ref], [x[0] for x in ref64]
        print("largest relative loss gap over %d steps (%s, %s): torch fp32 vs fp64 %.2e, drift vs torch fp64 %.2e, "
              "drift vs torch fp32 %.2e" % (args.steps, kind, run, gap(t32, t64), gap(drift, t64), gap(drift, t32)))
    if first_bad is not None:
        dl, dg = metrics[first_bad]["loss"], metrics[first_bad]["grad_norm"]
        tl, tg = ref[first_bad]
        print("DISAGREE (%s, %s): first at step %d: drift loss %r vs torch %r (relative tolerance %.1e), "
              "grad norm %r vs %r (relative tolerance %.1e)" % (kind, run, first_bad, dl, tl, loss_tolerance(first_bad),
                                                                dg, tg, grad_norm_tolerance(first_bad)))
        return 1
    print("agree (%s, %s): %d steps, losses and gradient norms within tolerance; closest to it: step %d at %.2f "
          "of the bound" % (kind, run, args.steps, worst[1], worst[0]))
    return 0


def check(args):
    torch.set_num_threads(args.threads)
    return max(check_run(run, args) for run in args.run)


# ------------------------------------------------------------------------------------------------
# Benchmark: the models and batch sizes of `drift bench train`, in PyTorch float32.

BENCH_MODELS = {
    "mlp": {"kind": "mlp", "context": 16, "embed": 32, "hidden": 512, "hidden_layers": 1, "batch": 64},
    "attn": {"kind": "attn", "context": 64, "d_model": 128, "heads": 4, "layers": 2, "mlp_mult": 4,
             "activation": "tanh", "batch": 16},
    # drift's proxy (src/model/proxy.cpp) at the shipped configs/proxy_*.json size and a study size.
    "proxy": {"kind": "proxy", "input_dim": 32, "output_dim": 8, "d_model": 64, "layers": 4, "mlp_mult": 4,
              "batch": 64},
    "proxy_study": {"kind": "proxy", "input_dim": 32, "output_dim": 8, "d_model": 256, "layers": 4, "mlp_mult": 4,
                    "batch": 512},
}


def proxy_params(m, gen, teacher):
    """The proxy's student (affine LayerNorms, biases) or teacher (neither; float64) weights, N(0, 1/fan_in)."""
    dtype = torch.float64 if teacher else torch.float32
    d, f = m["d_model"], m["mlp_mult"] * m["d_model"]

    def w(out, fan):
        return (torch.randn(out, fan, generator=gen, dtype=dtype) / math.sqrt(fan)).requires_grad_(not teacher)

    def const(n, v):
        return torch.full((n,), v, dtype=dtype, requires_grad=not teacher)

    P = {"input.w": w(d, m["input_dim"]), "head.w": w(m["output_dim"], d)}
    for l in range(m["layers"]):
        P["block%d.mlp.fc.w" % l], P["block%d.mlp.proj.w" % l] = w(f, d), w(d, f)
    if not teacher:
        P["input.b"], P["head.b"] = const(d, 0.0), const(m["output_dim"], 0.0)
        P["ln_f.w"], P["ln_f.b"] = const(d, 1.0), const(d, 0.0)
        for l in range(m["layers"]):
            p = "block%d" % l
            P[p + ".ln.w"], P[p + ".ln.b"] = const(d, 1.0), const(d, 0.0)
            P[p + ".mlp.fc.b"], P[p + ".mlp.proj.b"] = const(f, 0.0), const(d, 0.0)
    return P


def proxy_act(m):
    """drift's proxy activations: tanh, or gelu in the tanh approximation (the bench models: gelu)."""
    if m.get("activation", "gelu") == "gelu":
        return lambda u: F.gelu(u, approximate="tanh")
    return torch.tanh


def proxy_forward(P, m, x):
    """h = input(x); h += proj(act(fc(LN(h)))) per block; head(LN_f(h)); with model.student "bare", h = x
    and the prediction is the last h. Without biases or LayerNorm affine weights in P (the teacher, fc
    without bias) those terms are left out, as drift's model does."""
    d, act = m["d_model"], proxy_act(m)
    bare = m.get("student") == "bare"

    def lin(h, name):
        return F.linear(h, P[name + ".w"], P.get(name + ".b"))

    def ln(h, name):
        return F.layer_norm(h, (d,), P.get(name + ".w"), P.get(name + ".b"), eps=1e-5)

    h = x if bare else lin(x, "input")
    for l in range(m["layers"]):
        p = "block%d" % l
        h = h + lin(act(lin(ln(h, p + ".ln"), p + ".mlp.fc")), p + ".mlp.proj")
    return h if bare else lin(ln(h, "ln_f"), "head")


def proxy_teacher(T, m, x):
    """The teacher from its dumped weights (float64): the projected architecture without biases or
    affine LayerNorms, or (model.teacher "mlp") the plain blocks h = act(h W1^T) W2^T."""
    if m["teacher"] != "mlp":
        return proxy_forward(T, dict(m, student="projected"), x)
    act, h, l = proxy_act(m), x, 0
    while "block%d.mlp.fc.w" % l in T:
        h = act(h @ T["block%d.mlp.fc.w" % l].T) @ T["block%d.mlp.proj.w" % l].T
        l += 1
    return h


def bench_params(m, vocab, gen):
    """Parameters shaped as drift's, initialised with drift's standard deviations (values matter
    for speed only through denormals, which these never reach)."""
    def normal(shape, sd):
        return (torch.randn(*shape, generator=gen) * sd).requires_grad_()

    P = {}
    if m["kind"] == "mlp":
        P["wte"] = normal((vocab, m["embed"]), 1.0)
        fan = m["context"] * m["embed"]
        for l in range(m["hidden_layers"]):
            P["hidden%d.w" % l] = normal((m["hidden"], fan), (5 / 3) / math.sqrt(fan))
            P["hidden%d.b" % l] = torch.zeros(m["hidden"], requires_grad=True)
            fan = m["hidden"]
        P["head.w"] = normal((vocab, fan), 0.1 / math.sqrt(fan))
        P["head.b"] = torch.zeros(vocab, requires_grad=True)
        return P
    c, f = m["d_model"], m["mlp_mult"] * m["d_model"]
    sd, sd_proj = 0.02, 0.02 / math.sqrt(2 * max(m["layers"], 1))
    P["wte"], P["wpe"] = normal((vocab, c), sd), normal((m["context"], c), sd)
    for l in range(m["layers"]):
        p = "block%d" % l
        for ln in (".ln1", ".ln2"):
            P[p + ln + ".w"] = torch.ones(c, requires_grad=True)
            P[p + ln + ".b"] = torch.zeros(c, requires_grad=True)
        for name, shape, s in ((".attn.qkv", (3 * c, c), sd), (".attn.proj", (c, c), sd_proj),
                               (".mlp.fc", (f, c), sd), (".mlp.proj", (c, f), sd_proj)):
            P[p + name + ".w"] = normal(shape, s)
            P[p + name + ".b"] = torch.zeros(shape[0], requires_grad=True)
    P["ln_f.w"], P["ln_f.b"] = torch.ones(c, requires_grad=True), torch.zeros(c, requires_grad=True)
    P["head.w"] = normal((vocab, c), sd)
    return P


def corpus_bytes(path):
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".txt")) \
        if os.path.isdir(path) else [path]
    if not files:
        raise InputProblem("%s: no *.txt files" % path)
    data = b""
    for f in files:
        s = open(f, "rb").read()
        data += s if s.endswith(b"\n") else s + b"\n"
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64)


def blas_core():
    """The kernel family of the OpenBLAS this process loaded (torch's BLAS on Debian), or "unknown".
    OpenBLAS picks kernels by CPU model; an OpenBLAS older than the CPU runs narrower ones (bookworm's
    0.3.21 runs AVX2 "Haswell" kernels on AMD Zen 5), which halves the reference's speed."""
    import ctypes
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "blas" in line and line.split()[-1].startswith("/")})
    except OSError:
        paths = []
    for path in paths:
        try:
            get = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            continue
        get.restype = ctypes.c_char_p
        return get().decode()
    return "unknown"


def bench(args):
    torch.set_num_threads(args.threads)
    torch.ones(64, 64) @ torch.ones(64, 64)  # loads torch's BLAS, so blas_core() can find it
    tokens = corpus_bytes(args.data)
    train = tokens[: len(tokens) - int(len(tokens) * 0.1)]
    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(0)
    rows = []
    core = blas_core()
    for name, m in BENCH_MODELS.items():
        if args.models and name not in args.models:
            continue
        cfg = {"model": m}
        b = m["batch"]
        if m["kind"] == "proxy":
            # Each step draws Gaussian inputs and labels them with the fixed float64 teacher (drift's
            # proxy does both every step, outside autograd), then trains the float32 student on MSE.
            P, T = proxy_params(m, gen, False), proxy_params(m, gen, True)

            def loss_of_step():
                x = torch.randn(b, m["input_dim"], generator=gen)
                with torch.no_grad():
                    y = proxy_forward(T, m, x.double()).float()
                return F.mse_loss(proxy_forward(P, m, x), y)
        else:
            P = bench_params(m, 256, gen)
            ctx = m["context"]

            def loss_of_step():
                starts = rng.integers(0, len(train) - ctx, size=b)
                windows = torch.from_numpy(np.stack([train[s:s + ctx + 1] for s in starts]))
                return MODELS[name](P, cfg, windows).mean()
        opt = torch.optim.AdamW(P.values(), lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)

        def one_step():
            opt.zero_grad(set_to_none=True)
            loss_of_step().backward()
            torch.nn.utils.clip_grad_norm_(P.values(), 1.0)
            opt.step()

        for _ in range(2):  # warm-up: allocator, thread pool
            one_step()
        # As drift bench train: --steps steps, else as many as fit in min_seconds (at least 5).
        # Wall time, and the CPU time of the whole process (every thread): on a shared machine
        # the latter is the steadier figure of the two.
        steps, t0, c0 = 0, time.perf_counter(), time.process_time()
        while (steps < args.steps) if args.steps else (steps < 5 or time.perf_counter() - t0 < args.min_seconds):
            one_step()
            steps += 1
        dt = (time.perf_counter() - t0) / steps
        ct = (time.process_time() - c0) / steps
        rows.append({"model": name, "policy": "pytorch_fp32", "threads": args.threads, "steps": steps,
                     "ms_per_step": dt * 1e3, "steps_per_s": 1.0 / dt, "cpu_ms_per_step": ct * 1e3,
                     "blas_core": core})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print("PyTorch %s float32, %d thread(s), BLAS kernels: %s" % (torch.__version__, args.threads, core))
        print("%-6s %-14s %8s %12s %12s %12s" % ("model", "policy", "steps", "ms/step", "steps/s", "cpu ms/step"))
        for r in rows:
            print("%-6s %-14s %8d %12.3f %12.2f %12.3f" % (r["model"], r["policy"], r["steps"], r["ms_per_step"],
                                                           r["steps_per_s"], r["cpu_ms_per_step"]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--run", action="append", help="a drift run directory made with --dump-init and "
                    "train.log_every=1 (repeatable: each run is checked in turn)")
    ap.add_argument("--steps", type=int, default=None, help="steps to compare (default 50) or to time per model")
    ap.add_argument("--table", action="store_true", help="print the per-step comparison")
    ap.add_argument("--fp64", action="store_true", help="also train in float64 and print the gaps to it")
    ap.add_argument("--bench", action="store_true", help="time the bench models in PyTorch float32")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--min-seconds", type=float, default=2.0,
                    help="--bench: minimum timed seconds per model when --steps is not given (default 2)")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "austen"),
                    help="--bench: corpus (default the shipped data/austen)")
    ap.add_argument("--json", action="store_true", help="--bench: print JSON rows (drift bench train --pytorch reads them)")
    ap.add_argument("--models", nargs="+", choices=sorted(BENCH_MODELS),
                    help="--bench: the models to time (default all)")
    args = ap.parse_args()
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    if args.steps is not None and args.steps < 1:
        ap.error("--steps must be >= 1")
    try:
        if args.bench:
            return bench(args)
        if not args.run:
            ap.error("give --run RUNDIR (or --bench)")
        args.steps = args.steps or 50
        return check(args)
    except (InputProblem, OSError, ValueError, KeyError) as e:
        sys.stderr.write("reference_pytorch.py: %s\n" % e)
        return 2
    except RuntimeError as e:  # torch: a dumped tensor whose shape does not fit the config's model
        sys.stderr.write("reference_pytorch.py: the run's tensors do not fit its config.json: %s\n" % e)
        return 2


if __name__ == "__main__":
    sys.exit(main())
