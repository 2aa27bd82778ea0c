#!/usr/bin/env python3
"""The exact oracle for drift's microxcaling emulation (scaling.emulate, docs/policy.md).

Re-derives, with Python integers and fractions only, what microxcaling's Python MX quantizer
(mx/mx_ops.py _quantize_mx with custom_cuda off) computes for float32 inputs, and checks that
`drift quantize` writes the same dequantised values, bit for bit (sign of zero and NaN included):

  shared exponent  e = floor(RN_fp32(log2 amax)) - emax(elem), with amax 0 taken as 2^-126
                   (torch.log2 in float32; modelled as the exact log2 rounded once to float32)
  scale range      scale_bits n: e < -(2^(n-1)-1) raised to it, e > 2^(n-1)-1 gives a NaN block;
                   the scale 2^e is a float32: 0 below 2^-149 (x/0, then 0*inf: a NaN block)
  elements         x / 2^e rounded to the element grid, nearest with ties away from zero
                   (sign(x) * floor(|x| + 1/2) on the shifted significand, the sum in float32),
                   clamped to +-max
  dequantisation   q * 2^e rounded to float32 (subnormals: multiples of 2^-149)

The float32 computations are decided exactly: log2(amax) is bracketed by rational bounds (series
for ln with explicit remainders, ln 2 from its atanh series) until the bracket lies inside one
float32 rounding interval; the sum |x| + 1/2 of "nearest" is rounded to float32 as a rational
(scaling.emulate.nearest_sum fp32). The elements' own float32 log2 (private exponents) is not
modelled: for fp8 elements it never changes a result (a value within 2^-23 relative
of a power of two rounds to that power on either grid).

Usage: oracle_microxcaling.py DRIFT_BINARY [--quick]
Exit status 0 when drift agrees everywhere, 1 on any disagreement, 2 on a run error.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

NAN = "nan"

# ----------------------------------------------------------------------------------------------
# float32 and float64 encodings


def f32_value(bits):
    """The exact value of a float32 bit pattern: a Fraction, or ("-0"/"+0") for zeros."""
    s, e, m = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    assert e != 0xFF
    if e == 0 and m == 0:
        return "-0" if s else "+0"
    v = Fraction(m, 1 << 149) if e == 0 else Fraction((1 << 23) | m) * Fraction(2) ** (e - 150)
    return -v if s else v


def f64_bits_of(v):
    """Encodes an exact value (a Fraction representable in float64, a zero marker or NAN)."""
    if v == NAN:
        return 0x7FF8000000000000
    if v == "+0":
        return 0
    if v == "-0":
        return 1 << 63
    if v in ("+inf", "-inf"):
        return (0xFFF if v == "-inf" else 0x7FF) << 52
    s = 1 if v < 0 else 0
    a = -v if s else v
    e = floor_log2(a)
    if e >= -1022:
        mant = a / Fraction(2) ** (e - 52)
        assert mant.denominator == 1
        return (s << 63) | ((e + 1023) << 52) | (mant.numerator - (1 << 52))
    mant = a / Fraction(2) ** -1074
    assert mant.denominator == 1
    return (s << 63) | mant.numerator


def f64_decode(bits):
    s, e, m = bits >> 63, (bits >> 52) & 0x7FF, bits & ((1 << 52) - 1)
    if e == 0x7FF:
        return NAN if m else ("-inf" if s else "+inf")
    if e == 0 and m == 0:
        return "-0" if s else "+0"
    v = Fraction(m, 1) * Fraction(2) ** -1074 if e == 0 else Fraction((1 << 52) | m) * Fraction(2) ** (e - 1075)
    return -v if s else v


def floor_log2(a):
    """floor(log2 a) for a Fraction a > 0, exactly."""
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    return e


def rn_half_even(q):
    """Round a non-negative Fraction to the nearest integer, ties to even."""
    f = q.numerator // q.denominator
    r = q - f
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and f % 2 == 1):
        f += 1
    return f


def rn_fp32(v):
    """v (a Fraction) rounded to the nearest float32, ties to even; +-inf past the range; a zero
    result keeps v's sign."""
    if v == 0:
        return "+0"
    neg = v < 0
    a = -v if neg else v
    e = max(floor_log2(a), -126)
    ulp = Fraction(2) ** (e - 23)
    n = rn_half_even(a / ulp)
    r = n * ulp
    if r >= Fraction(2) ** 128:
        return "-inf" if neg else "+inf"
    if r == 0:
        return "-0" if neg else "+0"
    return -r if neg else r


# ----------------------------------------------------------------------------------------------
# log2 with rational bounds

LN2_TERMS = 120


def _ln2_bounds():
    # ln 2 = 2 atanh(1/3) = 2 sum_{i>=0} (1/3)^(2i+1) / (2i+1); remainder < 2 (1/3)^(2N+1) / ((2N+1)(1 - 1/9)).
    z = Fraction(1, 3)
    s = Fraction(0)
    for i in range(LN2_TERMS):
        s += z ** (2 * i + 1) / (2 * i + 1)
    n = LN2_TERMS
    tail = z ** (2 * n + 1) / ((2 * n + 1) * (1 - z * z))
    return 2 * s, 2 * (s + tail)


LN2_LO, LN2_HI = _ln2_bounds()


def ln_bounds(m, terms):
    """Bounds on ln m for a Fraction 1 <= m < 2: ln m = 2 atanh(z), z = (m-1)/(m+1) < 1/3."""
    z = (m - 1) / (m + 1)
    s = Fraction(0)
    zz = z * z
    p = z
    for i in range(terms):
        s += p / (2 * i + 1)
        p *= zz
    tail = p / ((2 * terms + 1) * (1 - zz))  # p = z^(2 terms + 1)
    return 2 * s, 2 * (s + tail)


_LOG2_CACHE = {}


def floor_rn32_log2(a):
    """floor(RN_fp32(log2 a)) for a Fraction a > 0, decided exactly."""
    if a not in _LOG2_CACHE:
        _LOG2_CACHE[a] = _floor_rn32_log2(a)
    return _LOG2_CACHE[a]


def _floor_rn32_log2(a):
    e = floor_log2(a)
    m = a / Fraction(2) ** e
    if m == 1:
        return e
    terms = 8
    while True:
        lo, hi = ln_bounds(m, terms)
        # log2 a = e + ln m / ln 2, bracketed.
        l_lo = e + lo / LN2_HI
        l_hi = e + hi / LN2_LO
        r_lo, r_hi = rn_fp32(l_lo), rn_fp32(l_hi)
        if r_lo == r_hi:
            r = r_lo
            if r in ("+0", "-0"):
                return -1 if l_lo < 0 else 0
            return r.numerator // r.denominator  # floor (Fraction's // floors)
        terms *= 2
        if terms > 4096:
            raise RuntimeError("log2 bracket does not close for %s" % a)


# ----------------------------------------------------------------------------------------------
# The element formats (OCP MX v1.0; microxcaling's mx/formats.py agrees for these two)

FORMATS = {
    "fp8_e4m3": dict(M=3, emin=-6, emax=8, max=Fraction(448)),
    "fp8_e5m2": dict(M=2, emin=-14, emax=15, max=Fraction(57344)),
}


def round_elem_rna(x, f, sum_fp32=False):
    """x (a Fraction) to the element grid, nearest with ties away from zero (floor(t + 1/2) grid
    steps, t = |x| / step; with sum_fp32 the sum t + 1/2 is first rounded to float32, as
    microxcaling's torch.floor(torch.abs(A) + 0.5) on float32), clamped to +-max. Returns a
    Fraction or a signed zero marker (the input's sign)."""
    if x == 0:
        return "+0"
    neg = x < 0
    a = -x if neg else x
    E = max(floor_log2(a), f["emin"])
    ulp = Fraction(2) ** (E - f["M"])
    q = a / ulp
    s = q + Fraction(1, 2)
    if sum_fp32:
        s = rn_fp32(s)
    n = s.numerator // s.denominator
    r = min(n * ulp, f["max"])
    if r == 0:
        return "-0" if neg else "+0"
    return -r if neg else r


def mx_block(values, fmt, scale_bits, exponent, positive_zero, offset=0, sum_fp32=False):
    """microxcaling's MX cast of one block of float32 values (Fractions / zero markers): the
    dequantised values. `offset` is drift's scaling.offset (added to the shared exponent)."""
    f = FORMATS[fmt]
    mags = [abs(v) for v in values if not isinstance(v, str)]
    amax = max(mags) if mags else Fraction(0)
    if exponent == "log2_fp32":
        e = (-126 if amax == 0 else floor_rn32_log2(amax)) - f["emax"] + offset
    else:
        e = (-127 if amax == 0 else floor_log2(amax) - f["emax"] + offset)
    if scale_bits == 0:
        e = max(-127, min(127, e))
    else:
        lim = (1 << (scale_bits - 1)) - 1
        if e > lim or e > 127:
            return [NAN] * len(values)
        e = max(e, -lim)
        if e < -149:
            return [NAN] * len(values)
    s = Fraction(2) ** e
    out = []
    for v in values:
        if isinstance(v, str):  # a zero
            q = v
        else:
            q = round_elem_rna(v / s, f, sum_fp32)
        if isinstance(q, str):
            out.append("+0" if positive_zero else q)
            continue
        d = rn_fp32(q * s) if scale_bits != 0 else q * s
        if isinstance(d, str) and d in ("+0", "-0") and positive_zero:
            d = "+0"
        out.append(d)
    return out


# ----------------------------------------------------------------------------------------------
# Cases: blocks of 32 float32 bit patterns

BLOCK = 32


def f32_bits_pow2(L):
    """The float32 bit pattern of 2^L (-149 <= L <= 127)."""
    if L >= -126:
        return (L + 127) << 23
    return 1 << (L + 149)


def fill_block(first):
    """A block led by bit pattern `first` (its amax): -amax, three smaller magnitudes of both signs,
    then zeros of both signs."""
    out = [first, first | 0x80000000]
    step = 0x00340000
    b = first
    while len(out) < 6:
        b = b - step if b > step else b // 2
        out.append(b if len(out) % 2 == 0 else b | 0x80000000)
    return out + [0, 0x80000000] * ((BLOCK - len(out)) // 2)


def amax_sweep(quick):
    """Blocks whose amax runs over the float32 values just below (and at) each power of two."""
    per = 12 if quick else 40
    lo_L = -150 if not quick else -130
    blocks = []
    for L in range(lo_L, 128):
        top = f32_bits_pow2(L) if L >= -149 else 0
        for i in range(0, per + 1):
            b = top - i if L <= 127 else None
            if b is None or b <= 0:
                continue
            blocks.append(fill_block(b))
        if L <= 127 and L >= -149:
            blocks.append(fill_block(top))
    # The top of float32's range (log2 rounds to 128 just below 2^128).
    for i in range(1, per + 1):
        blocks.append(fill_block(0x7F800000 - i))
    return blocks


def f32_bits_of_value(v):
    """The float32 bit pattern of an exact value, or None when it is not a float32."""
    if v == 0:
        return 0
    neg = v < 0
    a = -v if neg else v
    e = floor_log2(a)
    if e > 127:
        return None
    if e >= -126:
        mant = a / Fraction(2) ** (e - 23)
        if mant.denominator != 1:
            return None
        bits = ((e + 127) << 23) | (mant.numerator - (1 << 23))
    else:
        mant = a / Fraction(2) ** -149
        if mant.denominator != 1:
            return None
        bits = mant.numerator
    return bits | (0x80000000 if neg else 0)


def element_grid(fmt):
    f = FORMATS[fmt]
    vals = set()
    for E in range(f["emin"], f["emax"] + 1):
        for n in range(0 if E == f["emin"] else (1 << f["M"]), 1 << (f["M"] + 1)):
            v = n * Fraction(2) ** (E - f["M"])
            if v <= f["max"]:
                vals.add(v)
    return sorted(vals)


def element_sweep(fmt, scale_exps):
    """Every element value, the midpoints (ties) and one float32 either side of each midpoint, at
    each scale 2^se; the block's first element max * 2^se fixes the scale."""
    f = FORMATS[fmt]
    g = element_grid(fmt)
    cand = list(g)
    for a, b in zip(g, g[1:]):
        cand.append((a + b) / 2)
    # above max: values that round past max and saturate
    top_ulp = Fraction(2) ** (f["emax"] - f["M"])
    cand += [f["max"] + top_ulp / 4, f["max"] + top_ulp / 2, f["max"] + top_ulp * 3 / 4]
    # Just below half the smallest subnormal: (1/2 - 2^-25) steps, whose float32 sum with 1/2 rounds to 1.
    cand.append((Fraction(1, 2) - Fraction(1, 1 << 25)) * Fraction(2) ** (f["emin"] - f["M"]))
    blocks = []
    for se in scale_exps:
        s = Fraction(2) ** se
        lead = f32_bits_of_value(f["max"] * s)
        lead_hi = f32_bits_of_value((f["max"] + top_ulp * 3 / 4) * s)  # amax inside the top binade
        vals = []
        for c in cand:
            b = f32_bits_of_value(c * s)
            if b is None:
                continue
            for d in (b, b - 1, b + 1):
                if 0 < d < 0x7F800000:
                    vals += [d, d | 0x80000000]
        for first in (lead, lead_hi):
            if first is None:
                continue
            usable = [v for v in vals if (v & 0x7FFFFFFF) <= first]
            for i in range(0, len(usable), BLOCK - 1):
                chunk = usable[i:i + BLOCK - 1]
                chunk += [0] * (BLOCK - 1 - len(chunk))
                blocks.append([first] + chunk)
    return blocks


def special_blocks():
    """Zeros of both signs, tiny negatives that flush, subnormal amax (NaN under scale_bits 16)."""
    z = [0x80000000, 0] * (BLOCK // 2)
    tiny = [f32_bits_pow2(0)] + [0x80000001, 0x80000000, 0x00000001, 0x80400000] + [0] * (BLOCK - 5)
    sub = [0x00000001] + [0] * (BLOCK - 1)
    sub2 = [0x007FFFFF, 0x80000003] + [0x80000000] * (BLOCK - 2)
    return [z, tiny, sub, sub2]


# ----------------------------------------------------------------------------------------------
# Running drift


def write_npy(path, rows, cols, bits64):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (118 - len(header)) + "\n"
    with open(path, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        fh.write(struct.pack("<%dQ" % len(bits64), *bits64))


def read_npy_bits(path):
    data = open(path, "rb").read()
    hl = struct.unpack("<H", data[8:10])[0]
    body = data[10 + hl:]
    return list(struct.unpack("<%dQ" % (len(body) // 8), body))


def f32_to_f64_bits(b):
    v = f32_value(b)
    return f64_bits_of(v)


def run_case(drift, tmp, name, blocks, quantizer, fmt, scale_bits, exponent, positive_zero, sum_fp32=False):
    inp = os.path.join(tmp, name + "_in.npy")
    out = os.path.join(tmp, name + "_out.npy")
    write_npy(inp, len(blocks), BLOCK, [f32_to_f64_bits(b) for blk in blocks for b in blk])
    p = subprocess.run([drift, "quantize", "--in", inp, "--out", out, "--quantizer", json.dumps(quantizer)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("%s: drift quantize failed (rc %d): %s" % (name, p.returncode, p.stderr.strip()[:400]))
        sys.exit(2)
    got = read_npy_bits(out)
    bad = 0
    shown = 0
    for i, blk in enumerate(blocks):
        want = mx_block([f32_value(b) for b in blk], fmt, scale_bits, exponent, positive_zero, 0, sum_fp32)
        for j, w in enumerate(want):
            gbits = got[i * BLOCK + j]
            g = f64_decode(gbits)
            ok = (g == NAN) if w == NAN else (gbits == f64_bits_of(w))
            if not ok:
                bad += 1
                if shown < 5:
                    shown += 1
                    print("  %s block %d elem %d: input %08x (amax %08x) want %s got %s" %
                          (name, i, j, blk[j], blk[0], w, g))
    n = len(blocks) * BLOCK
    print("%-40s %7d elements  %s" % (name, n, "ok" if bad == 0 else "%d DISAGREE" % bad))
    return bad


def double_thresholds(drift, tmp):
    """Double amaxes at the exact point where RN_fp32(log2 amax) reaches L, for L whose float32
    spacing just below covers k = 16..25 (h = 2^-k): the oracle finds the smallest 53-bit
    significand S with floor(RN_fp32(log2(S 2^(L-53)))) = L by bisection on its own log2, and drift
    must put amax = (S-2 .. S+1) 2^(L-53) one binade apart accordingly. scaling.offset brings each
    scale back into E8M0's range so that the exponent shows in the values."""
    bad = 0
    for L in (1, 2, 3, 4, 8, 16, 32, 64, 128, 256, -1, -2, -4, -8, -16, -32, -64, -128, -256):
        e = L - 1
        lo, hi = 1 << 52, (1 << 53) - 1  # floor(RN(log2)) = e at lo; = L at hi (checked below)
        scale = Fraction(2) ** (e - 52)
        assert floor_rn32_log2(lo * scale) == e and floor_rn32_log2(hi * scale) == L
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if floor_rn32_log2(mid * scale) == L:
                hi = mid
            else:
                lo = mid
        offset = max(-254, min(254, -(L - 1 - 8)))
        blocks = []
        for S in (hi - 2, hi - 1, hi, hi + 1):
            v = S * scale
            blocks.append([v, -v] + ["+0"] * (BLOCK - 2))
        q = {"format": "fp8_e4m3", "rounding": "rna",
             "scaling": {"kind": "block", "block": 32, "rule": "floor", "offset": offset,
                         "emulate": {"exponent": "log2_fp32"}}}
        inp = os.path.join(tmp, "thr_in.npy")
        out = os.path.join(tmp, "thr_out.npy")
        write_npy(inp, len(blocks), BLOCK, [f64_bits_of(v) for blk in blocks for v in blk])
        p = subprocess.run([drift, "quantize", "--in", inp, "--out", out, "--quantizer", json.dumps(q)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print("thresholds: drift quantize failed: " + p.stderr.strip()[:300])
            sys.exit(2)
        got = read_npy_bits(out)
        for i, blk in enumerate(blocks):
            want = mx_block(blk, "fp8_e4m3", 0, "log2_fp32", False, offset)
            for j in range(2):
                if got[i * BLOCK + j] != f64_bits_of(want[j]):
                    bad += 1
                    print("  threshold L=%d S=%d elem %d: want %s got %s" %
                          (L, hi - 2 + i, j, want[j], f64_decode(got[i * BLOCK + j])))
    print("%-40s %7d amaxes    %s" % ("double thresholds (k = 16..25)", 19 * 4, "ok" if bad == 0 else "%d DISAGREE" % bad))
    return bad


def coverage(blocks):
    """How many blocks the departures reach: the shared exponent one binade up (float32 log2), a NaN
    block from a float32 scale (scale_bits 16), elements whose float32 dequantisation rounds, and
    ties between two e4m3 grid values (rounded away from zero). Each must be non-zero."""
    up = nan16 = dequant = ties = fp32_sum = 0
    f = FORMATS["fp8_e4m3"]
    for blk in blocks:
        vals = [f32_value(b) for b in blk]
        mags = [abs(v) for v in vals if not isinstance(v, str)]
        if not mags:
            continue
        amax = max(mags)
        if floor_rn32_log2(amax) != floor_log2(amax):
            up += 1
        e = floor_rn32_log2(amax) - f["emax"]
        if e < -149:
            nan16 += 1
            continue
        s = Fraction(2) ** e
        for v in vals:
            if isinstance(v, str):
                continue
            q = round_elem_rna(v / s, f)
            if not isinstance(q, str) and rn_fp32(q * s) != q * s:
                dequant += 1
            x = abs(v / s)
            E = max(floor_log2(x), f["emin"])
            t = x / Fraction(2) ** (E - f["M"])
            if t.denominator == 2:
                ties += 1
            if round_elem_rna(v / s, f, True) != round_elem_rna(v / s, f):
                fp32_sum += 1
    return dict(exponent_up=up, nan_blocks=nan16, fp32_dequant=dequant, ties=ties, fp32_sum=fp32_sum)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("drift")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    bad = 0
    sweep = amax_sweep(args.quick)
    specials = special_blocks()
    cov = coverage(sweep + element_sweep("fp8_e4m3", [-145, -140, -134, -127, 0]) + specials)
    print("coverage (e4m3 blocks): %s" % cov)
    if min(cov.values()) == 0:
        print("oracle_microxcaling: a departure is not reached by the cases")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        bad += double_thresholds(args.drift, tmp)
        for fmt in ("fp8_e4m3", "fp8_e5m2"):
            preset = "mxfp8_%s_microxcaling" % fmt[4:]
            elems = element_sweep(fmt, [-145, -140, -134, -127, -100, -20, -3, 0, 7, 100])
            allb = sweep + elems + specials
            # (each departure alone: the scales where it shows, and one ordinary scale)
            someb = sweep + element_sweep(fmt, [-145, -140, -127, 0]) + specials
            # The preset: log2_fp32 exponent, scale_bits 16, rna, saturate.
            bad += run_case(args.drift, tmp, preset, allb, preset, fmt, 16, "log2_fp32", False, True)
            # Each departure alone on the OCP quantizer.
            base = {"format": fmt, "rounding": "rna", "scaling": {"kind": "block", "block": 32, "rule": "floor"}}
            q = json.loads(json.dumps(base))
            q["scaling"]["emulate"] = {"exponent": "log2_fp32"}
            bad += run_case(args.drift, tmp, fmt + " exponent log2_fp32", someb, q, fmt, 0, "log2_fp32", False)
            q = json.loads(json.dumps(base))
            q["scaling"]["emulate"] = {"scale_bits": 16, "zero": "positive"}
            bad += run_case(args.drift, tmp, fmt + " scale_bits 16, zero positive", someb, q, fmt, 16, "exact", True)
            q = json.loads(json.dumps(base))
            q["scaling"]["emulate"] = {"nearest_sum": "fp32"}
            bad += run_case(args.drift, tmp, fmt + " nearest_sum fp32", someb, q, fmt, 0, "exact", False, True)
            q = json.loads(json.dumps(base))
            q["scaling"]["emulate"] = {"scale_bits": 8}
            bad += run_case(args.drift, tmp, fmt + " scale_bits 8", someb, q, fmt, 8, "exact", False)
    print("oracle_microxcaling: %s in %.1f s" % ("all agree" if bad == 0 else "%d disagreements" % bad,
                                                 time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
