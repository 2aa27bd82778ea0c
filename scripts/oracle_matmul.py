#!/usr/bin/env python3
"""The exact oracle for `drift matmul`.

Computes small matmuls with exact rational arithmetic (Python `fractions`, no floating point in
any computation) from the definition in src/arith/matmul.h, for a spread of precision policies,
and checks that `drift matmul` produces every element of C bit for bit.

    C[i,j] = out( alpha * outer_sum_b( s(i,j,b) * inner_sum_{k in b}( p(a_q[i,k] * b_q[k,j]) ) ) )

Every `+` and `*` is rounded once, in the format of the sum it belongs to; every sum starts from +0;
exact zero sums follow IEEE 754 (6.3). Operand quantizers (none, tensor, block/MX, tile/DeepSeek,
nvfp4) follow the recipes documented in src/arith/quantize.cpp, re-derived here with exact
fractions and this file's own rounding function. Stochastic rounding, permuted orders, delayed
scaling and the Hadamard transform are not covered. The fused tensor-core model (inner.fused) is
re-derived from the published models for the presets listed in TC_MODELS.

Inputs are exact binary fractions generated from a seeded integer RNG and written as float64 bit
patterns; C is read back as float64 bit patterns. Comparison is bitwise, any NaN equal to any NaN.

Usage: oracle_matmul.py DRIFT_BINARY [--policy NAME]... [--quick] [--verbose]
Exit status: 0 when drift agrees everywhere, 1 on any disagreement, 2 on a usage/run error.
"""
import argparse
import ast
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

# ----------------------------------------------------------------------------------------------
# Values: a nonzero finite value is a Fraction; the rest are these markers.
NAN, PINF, NINF, PZ, NZ = "nan", "+inf", "-inf", "+0", "-0"


def is_frac(v):
    return isinstance(v, Fraction)


def is_zero(v):
    return v is PZ or v is NZ


def is_inf(v):
    return v is PINF or v is NINF


def is_neg(v):
    if is_frac(v):
        return v < 0
    return v is NZ or v is NINF


def signed_zero(neg):
    return NZ if neg else PZ


def value_of(v):
    """Exact value of a finite v (zeros are 0)."""
    return v if is_frac(v) else Fraction(0)


def p2(e):
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def floor_log2(x):
    """floor(log2 x) for a Fraction x > 0."""
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()
    # 2^e <= n/d < 2^(e+2) after this estimate; fix it up exactly.
    if e >= 0:
        if n < (d << e):
            e -= 1
    else:
        if (n << -e) < d:
            e -= 1
    return e


def is_pow2(x):
    return x.numerator & (x.numerator - 1) == 0 and x.denominator & (x.denominator - 1) == 0


def ceil_log2(x):
    return floor_log2(x) + (0 if is_pow2(x) else 1)


# ----------------------------------------------------------------------------------------------
# Formats (the catalogue entries this oracle uses, written out from their definitions).


class Fmt:
    def __init__(self, name, exp_bits, man_bits, bias, inf, nan, subnormals):
        self.name, self.exp_bits, self.man_bits, self.bias = name, exp_bits, man_bits, bias
        self.inf, self.nan, self.subnormals = inf, nan, subnormals
        all_ones = (1 << exp_bits) - 1
        top_field, top_mant = all_ones, (1 << man_bits) - 1
        if nan == "ieee":
            top_field = all_ones - 1
        elif nan == "ones":
            if man_bits == 0:
                top_field = all_ones - 1
            else:
                top_mant -= 1
        self.emin = 1 - bias
        self.emax = top_field - bias
        self.max_finite = Fraction((1 << man_bits) + top_mant) * p2(self.emax - man_bits)
        self.min_normal = p2(self.emin)
        self.quantum_min = self.emin - man_bits
        self.has_neg_zero = nan != "negzero"


FORMATS = {
    f.name: f
    for f in [
        Fmt("fp64", 11, 52, 1023, True, "ieee", True),
        Fmt("fp32", 8, 23, 127, True, "ieee", True),
        Fmt("tf32", 8, 10, 127, True, "ieee", True),
        Fmt("bf16", 8, 7, 127, True, "ieee", True),
        Fmt("fp16", 5, 10, 15, True, "ieee", True),
        Fmt("fp8_e5m2", 5, 2, 15, True, "ieee", True),
        Fmt("fp8_e4m3", 4, 3, 7, False, "ones", True),
        Fmt("fp6_e3m2", 3, 2, 3, False, "none", True),
        Fmt("fp6_e2m3", 2, 3, 1, False, "none", True),
        Fmt("fp4_e2m1", 2, 1, 1, False, "none", True),
    ]
}
FP32 = FORMATS["fp32"]
E4M3 = FORMATS["fp8_e4m3"]


class Rnd:
    def __init__(self, mode="rne", overflow="saturate", flush=False):
        self.mode, self.overflow, self.flush = mode, overflow, flush


NEAREST_SAT = Rnd("rne", "saturate", False)


def zero_of(neg, f):
    return signed_zero(neg and f.has_neg_zero)


def max_of(neg, f):
    return -f.max_finite if neg else f.max_finite


def overflow_value(neg, f, r):
    """IEEE 754: modes rounding away from zero in the overflow's direction give inf (NaN for a
    format without inf but with NaN), the others the largest finite value; saturate always clamps."""
    if r.overflow == "saturate":
        return max_of(neg, f)
    to_inf = {"rne": True, "rna": True, "rup": not neg, "rdn": neg, "rtz": False, "rto": False}[r.mode]
    if not to_inf:
        return max_of(neg, f)
    if f.inf:
        return NINF if neg else PINF
    if f.nan != "none":
        return NAN
    return max_of(neg, f)


def round_to(v, f, r):
    """v (exact) rounded once to format f under r."""
    if v is NAN:
        return NAN
    if is_inf(v):
        neg = v is NINF
        if r.overflow == "saturate":
            return max_of(neg, f)
        if f.inf:
            return v
        if f.nan != "none":
            return NAN
        return max_of(neg, f)
    if is_zero(v):
        return zero_of(v is NZ, f)
    neg = v < 0
    m = -v if neg else v
    q = max(floor_log2(m) - f.man_bits, f.quantum_min)  # exponent of the last kept bit
    scaled = m / p2(q)
    kept = scaled.numerator // scaled.denominator
    rem = scaled - kept
    half = Fraction(1, 2)
    mode = r.mode
    if mode == "rne":
        kept += 1 if (rem > half or (rem == half and kept % 2 == 1)) else 0
    elif mode == "rna":
        kept += 1 if rem >= half else 0
    elif mode == "rtz":
        pass
    elif mode == "rup":
        kept += 1 if (rem != 0 and not neg) else 0
    elif mode == "rdn":
        kept += 1 if (rem != 0 and neg) else 0
    elif mode == "rto":
        kept |= 1 if rem != 0 else 0
    else:
        raise ValueError("rounding mode not modelled by the oracle: " + mode)
    if kept == 0:
        return zero_of(neg, f)
    mag = kept * p2(q)
    if mag > f.max_finite:
        return overflow_value(neg, f, r)
    if mag < f.min_normal and (r.flush or not f.subnormals):
        return zero_of(neg, f)
    return -mag if neg else mag


def op_add(x, y, f, r):
    if x is NAN or y is NAN:
        return NAN
    if is_inf(x) or is_inf(y):
        if is_inf(x) and is_inf(y) and x is not y:
            return NAN
        return round_to(x if is_inf(x) else y, f, r)
    s = value_of(x) + value_of(y)
    if s == 0:
        if is_zero(x) and is_zero(y) and x is y:
            z = x
        else:
            z = signed_zero(r.mode == "rdn")
        return round_to(z, f, r)
    return round_to(s, f, r)


def exact_mul(x, y):
    """x*y exactly (signs of zeros and infinities by IEEE rules)."""
    if x is NAN or y is NAN:
        return NAN
    neg = is_neg(x) != is_neg(y)
    if is_inf(x) or is_inf(y):
        if is_zero(x) or is_zero(y):
            return NAN
        return NINF if neg else PINF
    if is_zero(x) or is_zero(y):
        return signed_zero(neg)
    return x * y


def op_mul(x, y, f, r):
    return round_to(exact_mul(x, y), f, r)


def op_div(x, y, f, r):
    """x / y for finite positive x, y (all the oracle needs: scale factors)."""
    assert is_frac(x) and is_frac(y) and x > 0 and y > 0
    return round_to(x / y, f, r)


def fp32_mul(x, y):
    return op_mul(x, y, FP32, NEAREST_SAT)


def fp32_div(x, y):
    return op_div(x, y, FP32, NEAREST_SAT)


# ----------------------------------------------------------------------------------------------
# float64 bit patterns and .npy files


def from_bits(u):
    """The exact value of a float64 bit pattern."""
    neg = (u >> 63) & 1
    e = (u >> 52) & 0x7FF
    m = u & ((1 << 52) - 1)
    if e == 0x7FF:
        return NAN if m else (NINF if neg else PINF)
    if e == 0:
        if m == 0:
            return NZ if neg else PZ
        v = m * p2(-1074)
    else:
        v = ((1 << 52) | m) * p2(e - 1075)
    return -v if neg else v


def to_bits(v):
    """The float64 bit pattern of v, which must be representable exactly."""
    if v is NAN:
        return 0x7FF8000000000000
    if v is PINF:
        return 0x7FF0000000000000
    if v is NINF:
        return 0xFFF0000000000000
    if v is PZ:
        return 0
    if v is NZ:
        return 1 << 63
    neg = v < 0
    m = -v if neg else v
    e = floor_log2(m)
    if e > 1023:
        raise ValueError("not representable in float64")
    if e < -1022:  # subnormal
        sig = m / p2(-1074)
        field = 0
    else:
        sig = m / p2(e - 52) - (1 << 52)
        field = e + 1023
    if sig.denominator != 1:
        raise ValueError("not representable in float64: %s" % v)
    return (int(neg) << 63) | (field << 52) | sig.numerator


def write_npy(path, rows, cols, values):
    """values: row-major list of exact values, written as '<f8' from their bit patterns."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    with open(path, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        fh.write(struct.pack("<%dQ" % len(values), *[to_bits(v) for v in values]))


def read_npy_bits(path):
    """(shape, row-major list of float64 bit patterns)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(path + ": not a .npy file")
    major = data[6]
    if major == 1:
        hlen = struct.unpack("<H", data[8:10])[0]
        start = 10
    else:
        hlen = struct.unpack("<I", data[8:12])[0]
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    descr, shape, fortran = header["descr"], tuple(header["shape"]), header["fortran_order"]
    count = 1
    for s in shape:
        count *= s
    body = data[start + hlen:]
    if descr in ("<f8", "=f8", ">f8"):
        end = ">" if descr == ">f8" else "<"
        bits = list(struct.unpack(end + "%dQ" % count, body[:8 * count]))
    else:
        raise ValueError(path + ": expected float64, got " + descr)
    if fortran and len(shape) == 2:
        r, c = shape
        bits = [bits[j * r + i] for i in range(r) for j in range(c)]
    return shape, bits


# ----------------------------------------------------------------------------------------------
# Policy: the JSON drift reads, and the oracle's reading of it (documented defaults).

AMAX_FLOOR_DEFAULT = from_bits(0x3D719799812DEA11)  # the double 1e-12


def rnd_of(d, default_overflow):
    return Rnd(d.get("rounding", "rne"), d.get("overflow", default_overflow), d.get("subnormals", "keep") == "flush")


class Quant:
    def __init__(self, d):
        self.fmt = FORMATS[d.get("format", "fp32")]
        self.rnd = rnd_of(d, "saturate")
        s = d.get("scaling", {})
        self.kind = s.get("kind", "none")
        self.block = s.get("block", {"block": 32, "tile": 128, "nvfp4": 16}.get(self.kind, 32))
        self.two_d = s.get("two_d", False)
        self.rule = s.get("rule", "floor")
        self.offset = s.get("offset", 0)
        self.margin = s.get("margin", 0)
        self.pow2 = s.get("pow2", False)
        if "amax_floor" in s:  # only exact binary fractions given as integers/strings are supported
            self.amax_floor = Fraction(s["amax_floor"])
        else:
            self.amax_floor = AMAX_FLOOR_DEFAULT
        for unsupported in ("hadamard", "history", "algo"):
            if s.get(unsupported):
                raise ValueError("oracle does not model scaling." + unsupported)
        if self.kind not in ("none", "tensor", "block", "tile", "nvfp4"):
            raise ValueError("oracle does not model scaling kind " + self.kind)


class Acc:
    def __init__(self, d):
        self.fmt = FORMATS[d.get("format", "fp32")]
        self.rnd = rnd_of(d, "ieee")
        order = d.get("order", "sequential")
        self.split = 2
        if order.startswith("split:"):
            self.split = int(order[6:])
            order = "split"
        if order.startswith("splitk:"):
            self.split = int(order[7:])
            order = "splitk"
        if order not in ("sequential", "reverse", "pairwise", "split", "splitk"):
            raise ValueError("oracle does not model order " + order)
        self.order = order
        self.promote_every = d.get("promote_every", 0)
        self.fused = None
        if d.get("fused"):
            if d["fused"] not in TC_MODELS:
                raise ValueError("oracle does not know the tensor-core model " + d["fused"])
            self.fused = TC_MODELS[d["fused"]]


class Policy:
    def __init__(self, d):
        self.a = Quant(d.get("a", {}))
        self.b = Quant(d.get("b", {}))
        prod = d.get("product")
        self.product = None if prod is None else (FORMATS[prod["format"]], rnd_of(prod, "saturate"))
        self.inner = Acc(d.get("inner", {}))
        self.outer = Acc(d.get("outer", {}))
        out = d.get("output", {})
        self.out_fmt = FORMATS[out.get("format", "fp32")]
        self.out_rnd = rnd_of(out, "ieee")


# ----------------------------------------------------------------------------------------------
# Quantizers (rows x k operands, k contiguous)


class QOp:
    pass


def abs_val(v):
    return -v if v < 0 else v


def quantize(x, rows, k, qz):
    """x: rows lists of k exact values. Returns QOp with q, block_k, block_scale, tensor_scale."""
    out = QOp()
    out.q = [[None] * k for _ in range(rows)]
    out.block_k = 0
    out.block_scale = None
    out.tensor_scale = Fraction(1)
    f, r = qz.fmt, qz.rnd

    def finite(v):
        return is_frac(v) or is_zero(v)

    amax = Fraction(0)
    for row in x:
        for v in row:
            if is_frac(v):
                amax = max(amax, abs_val(v))

    def cast(scaled):
        return round_to(scaled, f, r)

    if qz.kind == "none":
        for i in range(rows):
            for c in range(k):
                out.q[i][c] = cast(x[i][c])
        return out
    if qz.kind == "tensor":
        a = max(amax, qz.amax_floor)
        s = fp32_div(f.max_finite, a) * p2(-qz.margin)
        s = round_to(s, FP32, NEAREST_SAT)
        if qz.pow2:
            s = p2(floor_log2(s))
        for i in range(rows):
            for c in range(k):
                out.q[i][c] = cast(fp32_mul(x[i][c], s))
        out.tensor_scale = fp32_div(Fraction(1), s)
        return out
    # Block kinds: regions of `b` along k, `b` rows deep when 2-D.
    b = qz.block
    out.block_k = b
    bpr = (k + b - 1) // b
    out.block_scale = [[Fraction(1)] * bpr for _ in range(rows)]
    s_enc = Fraction(1)
    if qz.kind == "nvfp4":
        s_enc = fp32_div(E4M3.max_finite * f.max_finite, max(amax, qz.amax_floor))
        out.tensor_scale = fp32_div(Fraction(1), s_enc)
    rstep = b if qz.two_d else 1
    for r0 in range(0, rows, rstep):
        for c0 in range(0, k, b):
            rr = range(r0, min(rows, r0 + rstep))
            cc = range(c0, min(k, c0 + b))
            vals = [x[i][c] for i in rr for c in cc]
            if any(not finite(v) for v in vals):
                for i in rr:
                    out.block_scale[i][c0 // b] = NAN
                    for c in cc:
                        out.q[i][c] = NAN
                continue
            bamax = max([abs_val(v) for v in vals if is_frac(v)] + [Fraction(0)])
            if qz.kind == "block":
                if bamax == 0:
                    e = -127
                else:
                    e = mx_exponent(bamax, f, qz.rule) + qz.offset
                e = min(127, max(-127, e))
                scale, mult, exact = p2(e), p2(-e), True
            elif qz.kind == "tile":
                a = max(bamax, qz.amax_floor)
                if qz.pow2:
                    scale = p2(ceil_log2(op_div(a, f.max_finite, FP32, Rnd("rup", "saturate"))))
                    mult, exact = 1 / scale, True
                else:
                    scale = fp32_div(a, f.max_finite)
                    mult, exact = fp32_div(f.max_finite, a), False
            else:  # nvfp4
                dec = fp32_mul(fp32_div(bamax, f.max_finite), s_enc) if bamax != 0 else PZ
                stored = round_to(dec, E4M3, NEAREST_SAT)
                scale = stored
                mult = PZ if is_zero(stored) else fp32_div(s_enc, stored)
                exact = False
            for i in rr:
                out.block_scale[i][c0 // b] = scale
                for c in cc:
                    v = x[i][c]
                    scaled = exact_mul(v, mult) if exact else fp32_mul(v, mult)
                    out.q[i][c] = cast(scaled)
    return out


def mx_exponent(amax, elem, rule):
    if rule == "floor":  # OCP MX v1.0
        return floor_log2(amax) - elem.emax
    if rule == "ceil":
        return ceil_log2(amax) - elem.emax
    if rule == "rceil":  # fp32(amax * fp32(1/max)), up to a power of two
        return ceil_log2(fp32_mul(amax, fp32_div(Fraction(1), elem.max_finite)))
    if rule == "even":  # amax rounded (rne) to the element precision first
        wide = Fmt("wide", 11, elem.man_bits, 1023, True, "ieee", True)
        return floor_log2(round_to(amax, wide, NEAREST_SAT)) - elem.emax
    raise ValueError(rule)


# ----------------------------------------------------------------------------------------------
# The fused multi-term tensor-core model (Fasi, Higham, Mikaitis, Pranesh 2021; Khattak and
# Mikaitis 2025, models/*TC.m of north-numerical-computing/MATLAB-tensor-core): groups of `terms`
# exact products plus the running sum c, all aligned to the largest exponent E (products counted
# by e(a) + e(b), inputs below the input format's emin counted at emin, unnormalised; c counted
# at the output format's emin when subnormal; E at least min_align_exp), each term truncated
# toward zero to a multiple of 2^(E - (23 + neab)), added exactly, normalised once and rounded
# (rtz/rne) to the output format with its precision narrowed to 23 + neab where that is smaller;
# a result reaching the output's infinity exponent is infinite. An exactly cancelling group is +0.


class TcModel:
    def __init__(self, terms, neab, rounding, min_align, inp, out, promote=0):
        self.terms, self.neab, self.rounding, self.min_align = terms, neab, rounding, min_align
        self.inp, self.out, self.promote = FORMATS[inp], FORMATS[out], promote
        self.kept = 23 + neab
        self.out_man = min(self.out.man_bits, 23 + neab)


NO_MIN = None
TC_MODELS = {
    # name: (terms, neab, final rounding, min alignment exponent, input, output), from the models/*.m files
    "v100_fp16": TcModel(4, 0, "rtz", NO_MIN, "fp16", "fp32"),
    "v100_fp16_out16": TcModel(4, 0, "rne", NO_MIN, "fp16", "fp16"),
    "a100_bf16": TcModel(8, 1, "rtz", NO_MIN, "bf16", "fp32"),
    "a100_tf32": TcModel(4, 1, "rtz", NO_MIN, "tf32", "fp32"),
    "h100_fp16": TcModel(16, 2, "rtz", -133, "fp16", "fp32"),
    "h100_fp8_e4m3": TcModel(32, -10, "rtz", -133, "fp8_e4m3", "fp32"),
    "h100_fp8_promote128": TcModel(32, -10, "rtz", -133, "fp8_e4m3", "fp32", 128),
    "b200_fp16_out16": TcModel(16, 2, "rne", -15, "fp16", "fp16"),
}


def tc_exp(v, emin):
    return max(floor_log2(abs_val(v)), emin)


def tc_round(s, model):
    """Exact nonzero s rounded to the model's result grid (output range, out_man fraction bits)."""
    o = model.out
    grid = Fmt("grid", o.exp_bits, model.out_man, o.bias, True, "ieee", True)
    grid.max_finite = p2(100000)  # no upper limit here
    grid.quantum_min = o.emin - model.out_man
    r = round_to(s, grid, Rnd(model.rounding, "ieee", False))
    if is_frac(r) and abs_val(r) >= p2(o.emax + 1):
        return NINF if r < 0 else PINF
    return r


def tc_group(c, xs, ys, model):
    specials = [c] + [exact_mul(x, y) for x, y in zip(xs, ys)]
    if any(v is NAN for v in specials) or (PINF in specials and NINF in specials):
        return NAN
    if PINF in specials:
        return PINF
    if NINF in specials:
        return NINF
    E = None
    prods = []
    for x, y in zip(xs, ys):
        if is_zero(x) or is_zero(y):
            continue
        e = tc_exp(x, model.inp.emin) + tc_exp(y, model.inp.emin)
        E = e if E is None else max(E, e)
        prods.append(x * y)
    if is_frac(c):
        ec = tc_exp(c, model.out.emin)
        E = ec if E is None else max(E, ec)
        prods.append(c)
    if E is None:
        return PZ  # c is zero and no non-zero product
    if model.min_align is not None:
        E = max(E, model.min_align)
    unit = p2(E - model.kept)
    total = Fraction(0)
    for t in prods:
        mag = abs_val(t) / unit
        cut = mag.numerator // mag.denominator  # truncated toward zero
        total += -cut if t < 0 else cut
    if total == 0:
        return PZ
    return tc_round(total * unit, model)


def tc_chain(xs, ys, model):
    c = PZ
    for s in range(0, len(xs), model.terms):
        c = tc_group(c, xs[s:s + model.terms], ys[s:s + model.terms], model)
    return c


def tc_dot(xs, ys, model):
    if model.promote <= 0:
        return tc_chain(xs, ys, model)
    acc = PZ
    for s in range(0, len(xs), model.promote):
        part = tc_chain(xs[s:s + model.promote], ys[s:s + model.promote], model)
        acc = op_add(acc, part, model.out, Rnd("rne", "ieee", False))
    return acc


# ----------------------------------------------------------------------------------------------
# Sums and the matmul


def ordered_sum(terms, acc):
    f, r = acc.fmt, acc.rnd

    def add(x, y):
        return op_add(x, y, f, r)

    n = len(terms)
    if acc.order == "sequential":
        s = PZ
        for t in terms:
            s = add(s, t)
        return s
    if acc.order == "reverse":
        s = PZ
        for t in reversed(terms):
            s = add(s, t)
        return s
    if acc.order == "pairwise":
        if n == 0:
            return PZ

        def rec(lo, hi):
            if hi - lo == 1:
                return add(PZ, terms[lo])
            mid = lo + (hi - lo) // 2
            left = rec(lo, mid)
            right = rec(mid, hi)
            return add(left, right)

        return rec(0, n)
    if acc.order == "split":
        parts = max(1, acc.split)
        partial = [PZ] * parts
        for i, t in enumerate(terms):
            partial[i % parts] = add(partial[i % parts], t)
        s = partial[0]
        for p in range(1, parts):
            s = add(s, partial[p])
        return s
    if acc.order == "splitk":
        # Contiguous parts of ceil(n/parts) terms (cuBLASLt's split-K); empty parts stay +0.
        parts = max(1, acc.split)
        size = -(-n // parts)
        partial = []
        for p in range(parts):
            s = PZ
            for t in terms[p * size:(p + 1) * size]:
                s = add(s, t)
            partial.append(s)
        s = partial[0]
        for p in range(1, parts):
            s = add(s, partial[p])
        return s
    raise ValueError(acc.order)


def oracle_matmul(A, B, m, k, n, pol):
    """A: m x k, B: k x n (lists of rows of exact values). Returns m x n list of values."""
    qa = quantize(A, m, k, pol.a)
    bt = [[B[t][j] for t in range(k)] for j in range(n)]
    qb = quantize(bt, n, k, pol.b)
    if qa.block_k and qb.block_k:
        lo, hi = min(qa.block_k, qb.block_k), max(qa.block_k, qb.block_k)
        if hi % lo:
            raise ValueError("blocks do not nest")
        kb = lo
    elif qa.block_k or qb.block_k:
        kb = qa.block_k or qb.block_k
    else:
        kb = pol.inner.promote_every if pol.inner.promote_every > 0 else max(k, 1)
    nblocks = (k + kb - 1) // kb if k else 0
    of, orr = pol.outer.fmt, pol.outer.rnd
    ta, tb = qa.tensor_scale, qb.tensor_scale
    alpha = Fraction(1) if ta * tb == 1 else op_mul(ta, tb, of, orr)
    C = []
    for i in range(m):
        row = []
        for j in range(n):
            block_terms = []
            for bi in range(nblocks):
                k0 = bi * kb
                k1 = min(k, k0 + kb)
                terms = []
                if pol.inner.fused is not None:
                    inner = tc_dot([qa.q[i][t] for t in range(k0, k1)], [qb.q[j][t] for t in range(k0, k1)],
                                   pol.inner.fused)
                for t in range(k0, k1 if pol.inner.fused is None else k0):
                    x, y = qa.q[i][t], qb.q[j][t]
                    if pol.product is not None:
                        terms.append(op_mul(x, y, pol.product[0], pol.product[1]))
                    else:
                        terms.append(exact_mul(x, y))
                if pol.inner.fused is None:
                    inner = ordered_sum(terms, pol.inner)
                sa = qa.block_scale[i][k0 // qa.block_k] if qa.block_k else Fraction(1)
                sb = qb.block_scale[j][k0 // qb.block_k] if qb.block_k else Fraction(1)
                # Scale application, in the outer format, for every block when either operand is
                # block-scaled (scale 1 included); operands without block scales have no such step.
                skip = not (qa.block_k or qb.block_k)
                if not skip:
                    s = op_mul(sa, sb, of, orr)
                t = inner if skip else op_mul(inner, s, of, orr)
                block_terms.append(t)
            y = ordered_sum(block_terms, pol.outer)
            if alpha != 1:
                y = op_mul(y, alpha, of, orr)
            row.append(round_to(y, pol.out_fmt, pol.out_rnd))
        C.append(row)
    return C



# ----------------------------------------------------------------------------------------------
# Inputs: exact binary fractions from a seeded integer RNG.


def rand_value(rng, lo_exp, hi_exp, max_bits, zero_pct=4):
    """sign * odd significand (1..max_bits bits) * 2^e with magnitude in [2^lo_exp, 2^(hi_exp+1))."""
    u = rng.randrange(100)
    if u < zero_pct:
        return NZ if rng.randrange(2) else PZ
    bits = rng.randint(1, max_bits)
    sig = (1 << (bits - 1)) | rng.getrandbits(bits - 1) | 1 if bits > 1 else 1
    e = rng.randint(lo_exp, hi_exp)
    v = sig * p2(e - (bits - 1))
    return -v if rng.randrange(2) else v


def make_inputs(kind, m, k, n, seed):
    rng = random.Random("%s/%d/%d/%d/%d" % (kind, m, k, n, seed))
    if kind == "general":  # magnitudes 2^-4..2^4, up to 30 significant bits (above fp32's 24)
        gen = lambda r, c: rand_value(rng, -4, 3, 30)
    elif kind == "blocky":  # per-row and per-16-block magnitude offsets: distinct block scales
        row_off = [rng.randint(-10, 10) for _ in range(max(m, n) + k)]
        blk_off = [rng.randint(-8, 8) for _ in range(64)]

        def gen(r, c, _ro=row_off, _bo=blk_off):
            base = _ro[r] + _bo[(c // 16) % 64]
            return rand_value(rng, base - 3, base + 1, 26)
    elif kind == "big":  # sums beyond fp16's range: overflow behaviour of the accumulators
        gen = lambda r, c: rand_value(rng, 4, 7, 11, zero_pct=0)
    elif kind == "tiny":  # products near and below fp16's normal range: subnormals and flushing
        gen = lambda r, c: rand_value(rng, -12, -8, 11)
    elif kind == "recip":  # MX blocks of 32 whose scales multiply to 1 (a: 2^-3, b: 2^3 for e4m3)
        def gen(r, c):
            if r < 7:  # a row: block amax in [2^5, 2^6)
                return rand_value(rng, 5, 5, 20, 0) if c % 32 == r % 32 else rand_value(rng, -3, 4, 20)
            return rand_value(rng, 11, 11, 20, 0) if c % 32 == r % 32 else rand_value(rng, 3, 10, 20)
    elif kind == "cancel":  # small integers: exact cancellation, signed zero sums
        gen = lambda r, c: Fraction(rng.randint(-2, 2)) if rng.randrange(8) else (NZ if rng.randrange(2) else PZ)
    else:
        raise ValueError(kind)

    def fix(v):
        return PZ if (is_frac(v) and v == 0) else v

    A = [[fix(gen(i, t)) for t in range(k)] for i in range(m)]  # A as M x K (row index i)
    B = [[fix(gen(j + 7, t)) for j in range(n)] for t in range(k)]  # B as K x N; "row" of b is j
    return A, B


# ----------------------------------------------------------------------------------------------
# The policies under test.


def acc(fmt, rounding="rne", order="sequential", overflow="ieee", **extra):
    d = {"format": fmt, "rounding": rounding, "overflow": overflow, "subnormals": "keep", "order": order}
    d.update(extra)
    return d


def quant(fmt, kind="none", rounding="rne", overflow="saturate", **scaling):
    sc = {"kind": kind}
    sc.update(scaling)
    return {"format": fmt, "rounding": rounding, "overflow": overflow, "subnormals": "keep", "scaling": sc}


def policy(a=None, b=None, inner=None, outer=None, product=None, output=None):
    d = {
        "a": a or quant("fp32"),
        "b": b or quant("fp32"),
        "product": product,
        "inner": inner or acc("fp32"),
        "outer": outer or acc("fp32"),
        "output": output or {"format": "fp32", "rounding": "rne", "overflow": "ieee", "subnormals": "keep"},
    }
    return d


GEN = ["general", "blocky", "cancel"]


def build_policies():
    P = []

    def add(name, d, data=GEN):
        P.append((name, d, data))

    add("fp32_passthrough", policy())
    add("fp32_ieee_operands", policy(a=quant("fp32", overflow="ieee"), b=quant("fp32", overflow="ieee")))
    add("e4m3_operands_fp32_acc", policy(a=quant("fp8_e4m3"), b=quant("fp8_e4m3")), GEN + ["big"])
    add("e5m2_operands_rtz_ieee", policy(a=quant("fp8_e5m2", rounding="rtz", overflow="ieee"),
                                         b=quant("fp8_e5m2", rounding="rna", overflow="ieee")))
    add("bf16_operands_fp32_acc", policy(a=quant("bf16"), b=quant("bf16")))
    for fmt in ("fp32", "fp16", "bf16"):
        for rnd in ("rne", "rtz"):
            data = GEN + (["big", "tiny"] if fmt == "fp16" else [])
            add("%s_acc_%s" % (fmt, rnd),
                policy(a=quant("bf16"), b=quant("bf16"), inner=acc(fmt, rnd), outer=acc(fmt, rnd)), data)
    add("fp16_acc_rup_rdn", policy(a=quant("bf16"), b=quant("bf16"), inner=acc("fp16", "rup"),
                                   outer=acc("fp16", "rdn")), GEN + ["big"])
    add("fp16_acc_rdn_zero_signs", policy(inner=acc("fp16", "rdn"), outer=acc("fp16", "rdn")), ["cancel"])
    add("fp16_acc_rto_rna", policy(a=quant("bf16"), b=quant("bf16"), inner=acc("fp16", "rto"),
                                   outer=acc("fp16", "rna")), GEN)
    add("fp16_acc_saturate", policy(a=quant("fp16"), b=quant("fp16"), inner=acc("fp16", overflow="saturate"),
                                    outer=acc("fp16", overflow="saturate")), ["big"])
    add("fp16_acc_flush", policy(a=quant("fp16"), b=quant("fp16"),
                                 inner=dict(acc("fp16"), subnormals="flush"), outer=acc("fp16")), ["tiny"])
    for order in ("sequential", "reverse", "pairwise", "split:4", "split:3", "splitk:3", "splitk:8"):
        add("bf16_acc_order_%s" % order.replace(":", ""),
            policy(a=quant("bf16"), b=quant("bf16"), inner=acc("bf16", order=order), outer=acc("fp32")))
    add("fp16_acc_pairwise_rtz", policy(a=quant("fp16"), b=quant("fp16"), inner=acc("fp16", "rtz", "pairwise"),
                                        outer=acc("fp16", "rtz", "pairwise")))
    add("promote16_bf16_inner_fp32_outer",
        policy(a=quant("bf16"), b=quant("bf16"), inner=acc("bf16", promote_every=16), outer=acc("fp32")))
    add("promote16_orders", policy(a=quant("bf16"), b=quant("bf16"),
                                   inner=acc("bf16", "rtz", "split:4", promote_every=16),
                                   outer=acc("fp16", "rne", "pairwise")))
    add("promote7_reverse", policy(a=quant("bf16"), b=quant("bf16"), inner=acc("fp16", "rne", "pairwise", promote_every=7),
                                   outer=acc("bf16", "rne", "reverse")))
    add("mxfp8_e4m3_floor", policy(a=quant("fp8_e4m3", "block", block=32, rule="floor"),
                                   b=quant("fp8_e4m3", "block", block=32, rule="floor")))
    add("mxfp8_e4m3_rceil", policy(a=quant("fp8_e4m3", "block", block=32, rule="rceil"),
                                   b=quant("fp8_e4m3", "block", block=32, rule="rceil")))
    add("mxfp8_e5m2_ceil_even", policy(a=quant("fp8_e5m2", "block", block=32, rule="ceil"),
                                       b=quant("fp8_e5m2", "block", block=32, rule="even")))
    add("mxfp6_offset", policy(a=quant("fp6_e2m3", "block", block=32, rule="floor", offset=1),
                               b=quant("fp6_e3m2", "block", block=16, rule="even", offset=-1)))
    add("mxfp4", policy(a=quant("fp4_e2m1", "block", block=32), b=quant("fp4_e2m1", "block", block=32)))
    add("mxfp8_bf16_inner_fp16_outer", policy(a=quant("fp8_e4m3", "block", block=32),
                                              b=quant("fp8_e4m3", "block", block=32),
                                              inner=acc("bf16", "rtz", "pairwise"), outer=acc("fp16", "rne", "split:2")))
    # Scale products of exactly 1 from scales that are not 1, with an inner sum wider than the outer
    # format: the case where "skip the scale multiply when the scales are 1" is not exact.
    add("mxfp8_fp32_inner_bf16_outer_recip", policy(a=quant("fp8_e4m3", "block", block=32),
                                                    b=quant("fp8_e4m3", "block", block=32),
                                                    inner=acc("fp32"), outer=acc("bf16")), ["recip", "general"])
    add("nvfp4", policy(a=quant("fp4_e2m1", "nvfp4", block=16), b=quant("fp4_e2m1", "nvfp4", block=16)))
    add("tensor_e4m3", policy(a=quant("fp8_e4m3", "tensor"), b=quant("fp8_e4m3", "tensor")), GEN + ["big"])
    add("tensor_e5m2_margin_pow2", policy(a=quant("fp8_e5m2", "tensor", margin=2), b=quant("fp8_e4m3", "tensor", pow2=True)))
    add("tensor_e4m3_bf16_outer", policy(a=quant("fp8_e4m3", "tensor"), b=quant("fp8_e4m3", "tensor"),
                                         inner=acc("bf16"), outer=acc("bf16")))
    add("tile_e4m3", policy(a=quant("fp8_e4m3", "tile", block=128), b=quant("fp8_e4m3", "tile", block=128, two_d=True)))
    add("tile_e4m3_32", policy(a=quant("fp8_e4m3", "tile", block=32), b=quant("fp8_e4m3", "tile", block=32, two_d=True),
                               outer=acc("bf16")))
    add("tile_e4m3_pow2", policy(a=quant("fp8_e4m3", "tile", block=32, pow2=True), b=quant("fp8_e4m3", "tile", block=16)))
    add("product_bf16", policy(a=quant("fp16"), b=quant("fp16"), product={"format": "bf16", "rounding": "rne",
                                                                           "overflow": "saturate", "subnormals": "keep"}))
    add("product_e4m3_rtz", policy(a=quant("bf16"), b=quant("bf16"), product={"format": "fp8_e4m3", "rounding": "rtz",
                                                                               "overflow": "ieee", "subnormals": "keep"},
                                   inner=acc("fp16")), GEN + ["big"])
    add("output_bf16", policy(output={"format": "bf16", "rounding": "rne", "overflow": "ieee", "subnormals": "keep"}))
    add("output_e4m3_rtz", policy(a=quant("bf16"), b=quant("bf16"),
                                  output={"format": "fp8_e4m3", "rounding": "rtz", "overflow": "saturate",
                                          "subnormals": "keep"}), GEN + ["big"])
    add("output_fp16_ieee", policy(a=quant("bf16"), b=quant("bf16"),
                                   output={"format": "fp16", "rounding": "rne", "overflow": "ieee",
                                           "subnormals": "flush"}), GEN + ["big", "tiny"])
    # The fused tensor-core model replaces the inner order (inner format/rounding are the model's).
    add("fused_v100_fp16", policy(a=quant("fp16"), b=quant("fp16"), inner={"fused": "v100_fp16"}), GEN + ["tiny"])
    add("fused_h100_fp16", policy(a=quant("fp16"), b=quant("fp16"), inner={"fused": "h100_fp16"},
                                  outer=acc("fp32", "rne", "pairwise")))
    add("fused_a100_bf16_promote16", policy(a=quant("bf16"), b=quant("bf16"),
                                            inner={"fused": "a100_bf16", "promote_every": 16}))
    add("fused_b200_fp16_out16", policy(a=quant("fp16"), b=quant("fp16"), inner={"fused": "b200_fp16_out16"},
                                        outer=acc("fp16")), GEN + ["tiny", "big"])
    add("fused_h100_fp8_mx", policy(a=quant("fp8_e4m3", "block", block=32), b=quant("fp8_e4m3", "block", block=32),
                                    inner={"fused": "h100_fp8_e4m3"}))
    add("fused_h100_fp8_tensor", policy(a=quant("fp8_e4m3", "tensor"), b=quant("fp8_e4m3", "tensor"),
                                        inner={"fused": "h100_fp8_e4m3"}))
    # cuBLASLt's split-K (docs/policy.md): 16-product blocks in 3 contiguous parts; K = 64 leaves the
    # third part empty, K = 37 gives parts of 1, 1 and 1 blocks.
    add("fused_h100_fp8_promote16_splitk3", policy(a=quant("fp8_e4m3", "tensor"), b=quant("fp8_e4m3", "tensor"),
                                                   inner={"fused": "h100_fp8_e4m3", "promote_every": 16},
                                                   outer=acc("fp32", "rne", "splitk:3")), GEN + ["tiny"])
    add("fused_h100_fp8_promote128_tile", policy(a=quant("fp8_e4m3", "tile", block=128),
                                                 b=quant("fp8_e4m3", "tile", block=128, two_d=True),
                                                 inner={"fused": "h100_fp8_promote128"}))
    return P


# Shapes per dataset: the two of the issue everywhere; a third with K prime (partial blocks and
# groups) on the general data.
SHAPES = [(3, 64, 3), (2, 100, 2), (4, 37, 5)]
SHAPES_OF = {"general": SHAPES, "blocky": SHAPES[:2], "cancel": SHAPES[:2], "big": SHAPES[:2], "tiny": SHAPES[:2],
             "recip": SHAPES[:2]}

# ----------------------------------------------------------------------------------------------
# Running drift


def fmt_value(v):
    if not is_frac(v):
        return v
    return "%s (0x%016x)" % (v, to_bits(v))


def describe_bits(u):
    v = from_bits(u)
    return "%s (0x%016x)" % (v if is_frac(v) else v, u)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("drift")
    ap.add_argument("--policy", action="append", help="run only these policies (by name)")
    ap.add_argument("--quick", action="store_true", help="first shape only")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not os.access(args.drift, os.X_OK):
        print("oracle_matmul: not an executable: " + args.drift, file=sys.stderr)
        return 2

    policies = build_policies()
    if args.policy:
        names = set(args.policy)
        policies = [p for p in policies if p[0] in names]
        if not policies:
            print("oracle_matmul: no such policy", file=sys.stderr)
            return 2

    def shapes_of(kind):
        return SHAPES_OF[kind][:1] if args.quick else SHAPES_OF[kind]

    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # results do not depend on it; start-up is faster
    t_start = time.time()
    total_bad = 0
    total_cases = 0
    with tempfile.TemporaryDirectory(prefix="drift_oracle_mm_") as tmp:
        # Inputs: per (dataset, shape) the logical A (M x K) and B (K x N), stored plainly and transposed.
        inputs = {}
        for name, d, data in policies:
            for kind in data:
                for (m, k, n) in shapes_of(kind):
                    key = (kind, m, k, n)
                    if key in inputs:
                        continue
                    A, B = make_inputs(kind, m, k, n, args.seed)
                    base = os.path.join(tmp, "%s_%d_%d_%d" % key)
                    write_npy(base + "_A.npy", m, k, [A[i][t] for i in range(m) for t in range(k)])
                    write_npy(base + "_B.npy", k, n, [B[t][j] for t in range(k) for j in range(n)])
                    write_npy(base + "_At.npy", k, m, [A[i][t] for t in range(k) for i in range(m)])
                    write_npy(base + "_Bt.npy", n, k, [B[t][j] for j in range(n) for t in range(k)])
                    inputs[key] = (A, B, base)
        run_no = 0
        for name, d, data in policies:
            pol = Policy(d)
            pol_json = json.dumps(d, separators=(",", ":"))
            cases = bad = 0
            shown = []
            for kind in data:
                for (m, k, n) in shapes_of(kind):
                    A, B, base = inputs[(kind, m, k, n)]
                    expect = oracle_matmul(A, B, m, k, n, pol)
                    # Two runs: the default path (fast where drift can prove it identical), and the
                    # literal reference path with the operands stored transposed (both, a only, b only).
                    run_no += 1
                    variants = [("", False, False, False),
                                ("--reference", True, run_no % 3 != 2, run_no % 3 != 1)]
                    for label, ref, ta, tb in variants:
                        out = os.path.join(tmp, "C.npy")
                        if os.path.exists(out):
                            os.unlink(out)
                        cmd = [args.drift, "matmul", "--a", base + ("_At.npy" if ta else "_A.npy"),
                               "--b", base + ("_Bt.npy" if tb else "_B.npy"), "--policy", pol_json, "--out", out]
                        if ta:
                            cmd.append("--transpose-a")
                        if tb:
                            cmd.append("--transpose-b")
                        if ref:
                            cmd.append("--reference")
                        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                        where = "%s %dx%dx%d %s%s%s" % (kind, m, k, n, label, " ta" if ta else "", " tb" if tb else "")
                        if proc.returncode != 0:
                            bad += 1
                            cases += 1
                            shown.append("%s: drift exited %d: %s" % (where, proc.returncode, proc.stderr.strip()[:400]))
                            continue
                        shape, bits = read_npy_bits(out)
                        if tuple(shape) != (m, n):
                            bad += 1
                            cases += 1
                            shown.append("%s: C has shape %s, expected (%d, %d)" % (where, shape, m, n))
                            continue
                        for i in range(m):
                            for j in range(n):
                                cases += 1
                                got = bits[i * n + j]
                                want = expect[i][j]
                                got_nan = (got >> 52) & 0x7FF == 0x7FF and got & ((1 << 52) - 1)
                                if want is NAN:
                                    ok = bool(got_nan)
                                else:
                                    ok = not got_nan and got == to_bits(want)
                                if not ok:
                                    bad += 1
                                    shown.append("%s C[%d,%d]: drift %s, oracle %s" %
                                                 (where, i, j, describe_bits(got), fmt_value(want)))
            total_cases += cases
            total_bad += bad
            print("%-34s %6d cases  %4d disagreements" % (name, cases, bad))
            for line in shown[: (50 if args.verbose else 4)]:
                print("    " + line)
            if bad:
                print("    policy: " + pol_json)
            sys.stdout.flush()
    print("oracle_matmul: %d policies, %d cases, %d disagreements, %.1f s" %
          (len(policies), total_cases, total_bad, time.time() - t_start))
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
