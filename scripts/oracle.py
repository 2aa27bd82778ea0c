#!/usr/bin/env python3
"""The exact oracle for `drift arith`.

Every expected result is computed here from first principles with Python integers (values are
exact rationals n/d, held as integer numerators and denominators; fractions.Fraction where
convenience beats speed). There is no floating point anywhere in this file: inputs are bit
patterns, decoded by the format's field layout, and outputs are bit patterns encoded the same way.

The oracle feeds thousands of lines per `drift arith` call through stdin, compares every output
line and prints, per check group, the number of cases, the number of disagreements and the first
few of them (input, expected, got). Exit status 1 on any disagreement.

Usage: scripts/oracle.py --drift path/to/drift [--jobs 2] [--quick] [--only GROUP,...]
"""

import argparse
import multiprocessing
import random
import subprocess
import sys
import time
from fractions import Fraction

MODES = ["rne", "rna", "rtz", "rup", "rdn", "rto"]
OVERFLOWS = ["saturate", "ieee"]
COMBOS = [(m, o) for m in MODES for o in OVERFLOWS]  # the 12 deterministic settings
M32 = 0xFFFFFFFF
SHOW = 5  # disagreements shown per group

# ----------------------------------------------------------------------------------------------
# Formats: the catalogue, restated from the published definitions (not read from drift).


class Fmt:
    def __init__(self, name, kind, E, M, bias, inf, nan):
        self.name, self.kind, self.E, self.M, self.bias, self.inf, self.nan = name, kind, E, M, bias, inf, nan
        if kind == "float":
            self.bits = 1 + E + M
            self.emin = 1 - bias
            allones = (1 << E) - 1
            if nan == "ieee":
                top_field, top_mant = allones - 1, (1 << M) - 1
            elif nan == "ones":
                top_field, top_mant = allones, (1 << M) - 2
            else:
                top_field, top_mant = allones, (1 << M) - 1
            self.maxm, self.maxq = (1 << M) + top_mant, top_field - bias - M  # max = maxm * 2^maxq
            self.QM, self.QMIN = M, self.emin - M
            self.negzero = nan != "negzero"
        elif kind == "int":
            self.bits = 8
            self.emin = None
            self.maxm, self.maxq = 127, 0
            self.QM, self.QMIN = 52, 0
            self.negzero = False
        else:  # pow2 (e8m0)
            self.bits = 8
            self.emin = -127
            self.maxm, self.maxq = 1, 127
            self.QM, self.QMIN = 0, -127
            self.negzero = False
        self.hexw = (self.bits + 3) // 4
        self.S = self.QMIN  # every finite value is an integer multiple of 2^S
        # Output strings of the special results.
        if nan == "ieee":
            self.nan_str = self.hx(((1 << E) - 1) << M | 1 << (M - 1))
        elif nan == "ones":
            self.nan_str = self.hx((1 << self.bits) - 1 if kind == "pow2" else (1 << (self.bits - 1)) - 1)
        elif nan == "negzero":
            self.nan_str = self.hx(1 << (self.bits - 1))
        else:
            self.nan_str = "nan"
        if kind == "pow2":  # unsigned, no zero: negative values and zeros are NaN
            self.max_str = [self.enc(False, self.maxm, self.maxq), self.nan_str]
            self.zero_str = [self.nan_str, self.nan_str]
        else:
            self.max_str = [self.enc(False, self.maxm, self.maxq), self.enc(True, self.maxm, self.maxq)]
            self.zero_str = [self.enc(False, 0, 0), self.enc(True, 0, 0)]
        if inf:
            self.inf_str = [self.hx(((1 << E) - 1) << M), self.hx(1 << (self.bits - 1) | ((1 << E) - 1) << M)]

    def hx(self, code):
        return format(code, "0%dx" % self.hexw)

    def maxval(self):
        return Fraction(self.maxm) * Fraction(2) ** self.maxq

    # Encoding of the finite value (-1)^neg * kept * 2^q (which lies on the grid).
    def enc(self, neg, kept, q):
        if self.kind == "int":
            v = kept << q if q >= 0 else kept >> -q
            assert v << -q == kept if q < 0 else True
            v = -v if neg else v
            return self.hx(v & 0xFF)
        if self.kind == "pow2":
            assert not neg and kept > 0 and kept & (kept - 1) == 0
            return self.hx(q + kept.bit_length() - 1 + 127)
        sign = 1 << (self.bits - 1) if neg else 0
        if kept == 0:
            return self.hx(sign if self.negzero else 0)  # formats without -0 give +0
        t = kept.bit_length() - 1
        e = q + t
        M = self.M
        if e >= self.emin:
            sh = M - t
            sig = kept << sh if sh >= 0 else kept >> -sh
            assert (sig << -sh if sh < 0 else sig >> sh) == kept
            field, mant = e + self.bias, sig - (1 << M)
        else:
            sh = q - (self.emin - M)
            assert sh >= 0
            field, mant = 0, kept << sh
        assert 0 <= field < (1 << self.E) and 0 <= mant < (1 << M)
        return self.hx(sign | field << M | mant)

    # Decoding of a code: (cls, neg, m) with cls 0 finite (value (-1)^neg * m * 2^S), 1 inf, 2 NaN.
    def dec(self, code):
        if self.kind == "int":
            v = code - 256 if code >= 128 else code
            return (0, v < 0, abs(v))
        if self.kind == "pow2":
            if code == 0xFF:
                return (2, False, 0)
            return (0, False, 1 << (code - 127 - self.S))
        M, E = self.M, self.E
        neg = bool(code >> (self.bits - 1))
        field = (code >> M) & ((1 << E) - 1)
        mant = code & ((1 << M) - 1)
        allones = (1 << E) - 1
        if self.nan == "ieee" and field == allones:
            return (2, False, 0) if mant else (1, neg, 0)
        if self.nan == "ones" and field == allones and mant == (1 << M) - 1:
            return (2, False, 0)
        if self.nan == "negzero" and code == 1 << (self.bits - 1):
            return (2, False, 0)
        if field == 0:
            m = mant << (self.emin - M - self.S)
        else:
            m = ((1 << M) | mant) << (field - self.bias - M - self.S)
        return (0, neg, m)

    def is_sub(self, m):  # a finite non-zero magnitude (at scale S) below the smallest normal
        return self.kind == "float" and 0 < m and m < (1 << (self.emin - self.S))


FMTS = {
    f.name: f
    for f in [
        Fmt("fp64", "float", 11, 52, 1023, True, "ieee"),
        Fmt("fp32", "float", 8, 23, 127, True, "ieee"),
        Fmt("tf32", "float", 8, 10, 127, True, "ieee"),
        Fmt("bf16", "float", 8, 7, 127, True, "ieee"),
        Fmt("fp16", "float", 5, 10, 15, True, "ieee"),
        Fmt("fp8_e5m2", "float", 5, 2, 15, True, "ieee"),
        Fmt("fp8_e4m3", "float", 4, 3, 7, False, "ones"),
        Fmt("fp8_e4m3fnuz", "float", 4, 3, 8, False, "negzero"),
        Fmt("fp8_e5m2fnuz", "float", 5, 2, 16, False, "negzero"),
        Fmt("fp6_e3m2", "float", 3, 2, 3, False, "none"),
        Fmt("fp6_e2m3", "float", 2, 3, 1, False, "none"),
        Fmt("fp4_e2m1", "float", 2, 1, 1, False, "none"),
        Fmt("e8m0", "pow2", 8, 0, 127, False, "ones"),
        Fmt("int8", "int", 0, 7, 0, False, "none"),
    ]
}
EIGHT = ["fp8_e5m2", "fp8_e4m3", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "e8m0", "int8"]
SMALL = ["fp6_e3m2", "fp6_e2m3", "fp4_e2m1"]

# The published maxima, as a check on the derivation above.
for _n, _v in [("fp8_e4m3", 448), ("fp8_e4m3fnuz", 240), ("fp8_e5m2fnuz", 57344), ("fp8_e5m2", 57344),
               ("fp6_e3m2", 28), ("fp6_e2m3", Fraction(15, 2)), ("fp4_e2m1", 6), ("int8", 127),
               ("fp16", 65504), ("e8m0", Fraction(2) ** 127)]:
    assert FMTS[_n].maxval() == _v, (_n, FMTS[_n].maxval())

# ----------------------------------------------------------------------------------------------
# Rounding: the exact value (-1)^neg * n/d (n, d > 0 integers) to format f.


def round_rat(neg, n, d, f, mode, ieee, flush, b=0, r=0):
    if f.kind == "pow2" and neg:
        return f.nan_str
    e = n.bit_length() - d.bit_length()  # floor(log2(n/d)) is e or e-1
    if e >= 0:
        if n < (d << e):
            e -= 1
    elif (n << -e) < d:
        e -= 1
    q = e - f.QM
    if q < f.QMIN:
        q = f.QMIN
    if q >= 0:
        kept, rem = divmod(n, d << q)
        D = d << q
    else:
        kept, rem = divmod(n << -q, d)
        D = d
    if rem:
        if mode == "rne":
            t = rem << 1
            kept += t > D or (t == D and kept & 1)
        elif mode == "rna":
            kept += (rem << 1) >= D
        elif mode == "rup":
            kept += not neg
        elif mode == "rdn":
            kept += neg
        elif mode == "rto":
            kept |= 1
        elif mode == "sr":
            kept += ((rem << b) // D) + (r & ((1 << b) - 1)) >= (1 << b)
        # rtz: nothing
    if kept == 0:
        if f.kind == "pow2":
            return f.enc(False, 1, f.QMIN)
        return f.zero_str[neg]
    # Overflow: kept * 2^q > maxm * 2^maxq ?
    if q >= f.maxq:
        over = (kept << (q - f.maxq)) > f.maxm
    else:
        over = kept > (f.maxm << (f.maxq - q))
    if over:
        if not ieee:
            return f.max_str[neg]
        to_inf = mode in ("rne", "rna", "sr") or (mode == "rup" and not neg) or (mode == "rdn" and neg)
        if not to_inf:
            return f.max_str[neg]
        if f.inf:
            return f.inf_str[neg]
        if f.nan != "none":
            return f.nan_str
        return f.max_str[neg]
    if flush and f.kind == "float":
        # kept * 2^q < 2^emin ?
        sh = f.emin - q
        if sh > 0 and kept < (1 << sh):
            return f.zero_str[neg]
    return f.enc(neg, kept, q)


def round_inf(neg, f, ieee):
    if f.kind == "pow2" and neg:
        return f.nan_str
    if not ieee:
        return f.max_str[neg]
    if f.inf:
        return f.inf_str[neg]
    if f.nan != "none":
        return f.nan_str
    return f.max_str[neg]


def round_zero(neg, f):
    if f.kind == "pow2":
        return f.nan_str
    return f.zero_str[neg]


# A value: (cls, neg, m, s): cls 0 finite = (-1)^neg * m * 2^s (m >= 0), 1 infinite, 2 NaN.
def round_val(v, f, mode, ieee, flush, b=0, r=0):
    cls, neg, m, s = v
    if cls == 2:
        return f.nan_str
    if cls == 1:
        return round_inf(neg, f, ieee)
    if m == 0:
        return round_zero(neg, f)
    if s >= 0:
        return round_rat(neg, m << s, 1, f, mode, ieee, flush, b, r)
    return round_rat(neg, m, 1 << -s, f, mode, ieee, flush, b, r)


# ----------------------------------------------------------------------------------------------
# Exact operations on values (cls, neg, m, s).

NAN = (2, False, 0, 0)


def v_neg(v):
    return (v[0], not v[1], v[2], v[3]) if v[0] != 2 else v


def v_add(a, b, mode):
    if a[0] == 2 or b[0] == 2:
        return NAN
    if a[0] == 1 or b[0] == 1:
        if a[0] == 1 and b[0] == 1 and a[1] != b[1]:
            return NAN
        return a if a[0] == 1 else b
    s = min(a[3], b[3])
    x = (-a[2] if a[1] else a[2]) << (a[3] - s)
    y = (-b[2] if b[1] else b[2]) << (b[3] - s)
    t = x + y
    if t == 0:
        if a[2] == 0 and b[2] == 0 and a[1] == b[1]:
            return (0, a[1], 0, 0)
        return (0, mode == "rdn", 0, 0)
    return (0, t < 0, abs(t), s)


def v_mul(a, b):
    if a[0] == 2 or b[0] == 2:
        return NAN
    neg = a[1] != b[1]
    if a[0] == 1 or b[0] == 1:
        if (a[0] == 0 and a[2] == 0) or (b[0] == 0 and b[2] == 0):
            return NAN
        return (1, neg, 0, 0)
    if a[2] == 0 or b[2] == 0:
        return (0, neg, 0, 0)
    return (0, neg, a[2] * b[2], a[3] + b[3])


_DEC = {}


def decode_v(f, code, flush):
    if f.bits <= 16:  # table of every code, built once per process
        t = _DEC.get((f.name, flush))
        if t is None:
            t = _DEC[(f.name, flush)] = [decode_v1(f, c, flush) for c in range(1 << f.bits)]
        return t[code]
    return decode_v1(f, code, flush)


def decode_v1(f, code, flush):
    cls, neg, m = f.dec(code)
    if flush and cls == 0 and f.is_sub(m):
        m = 0
    return (cls, neg, m, f.S)


# ----------------------------------------------------------------------------------------------
# Philox4x32-10 (Salmon et al., Random123), from the paper's definition.

PH_M0, PH_M1, PH_W0, PH_W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox4x32_10(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for rnd in range(10):
        if rnd:
            k0 = (k0 + PH_W0) & M32
            k1 = (k1 + PH_W1) & M32
        p0 = PH_M0 * c0
        p1 = PH_M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
    return (c0, c1, c2, c3)


def random_words(seed, n):
    key = (seed & M32, seed >> 32 & M32)
    out = []
    for blk in range((n + 3) // 4):
        out.extend(philox4x32_10((blk & M32, blk >> 32 & M32, 0, 0), key))
    return out[:n]


def philox_kat():
    vecs = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((M32,) * 4, (M32, M32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ]
    bad = []
    for ctr, key, want in vecs:
        got = philox4x32_10(ctr, key)
        if got != want:
            bad.append(("ctr=%s key=%s" % (ctr, key), " ".join("%08x" % w for w in want),
                        " ".join("%08x" % w for w in got)))
    return len(vecs), bad


# ----------------------------------------------------------------------------------------------
# Running drift.

DRIFT = None


def drift(args, lines):
    """Runs `drift arith args` with the given input lines; returns the output lines or raises."""
    p = subprocess.run([DRIFT, "arith"] + args, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("drift arith %s failed (rc %d): %s" % (" ".join(args), p.returncode, p.stderr.strip()[:300]))
    out = p.stdout.split("\n")
    if out and out[-1] == "":
        out.pop()
    return out


def compare(desc, lines, expected, got, bad):
    """Appends (input, expected, got) for each disagreement to bad (first SHOW kept); returns count."""
    if got == expected:
        return 0
    if len(got) != len(expected):
        bad.append((desc, "%d lines" % len(expected), "%d lines" % len(got)))
        return max(len(expected), 1)
    n = 0
    for i, (e, g) in enumerate(zip(expected, got)):
        if e != g:
            n += 1
            if len(bad) < SHOW:
                bad.append(("%s [%s]" % (desc, lines[i]), e, g))
    return n


def spec_args(mode, ovf, flush):
    return ["--rounding", mode, "--overflow", ovf, "--subnormals", "flush" if flush else "keep"]


def check_batch(op, fmt, lines, expected_by_combo, bad, extra=()):
    """Runs drift over each (mode, overflow, flush) of expected_by_combo; returns (cases, disagreements)."""
    cases = dis = 0
    for (mode, ovf, flush), expected in expected_by_combo:
        args = ["--op", op, "--format", fmt] + list(extra) + spec_args(mode, ovf, flush)
        desc = "%s %s %s %s %s%s" % (op, fmt, " ".join(extra), mode, ovf, " flush" if flush else "")
        try:
            got = drift(args, lines)
        except RuntimeError as ex:
            bad.append((desc, "output", str(ex)))
            got = []
        cases += len(lines)
        dis += compare(desc, lines, expected, got, bad)
    return cases, dis


# ----------------------------------------------------------------------------------------------
# fp32 bit patterns of exact values (for casts from fp32).

F32 = FMTS["fp32"]


def fp32_bits_of(neg, x):
    """The fp32 pattern of the exact non-negative rational x (must be representable)."""
    if x == 0:
        return (neg << 31)
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    if e >= -126:
        sig = x / Fraction(2) ** (e - 23)
        assert sig.denominator == 1 and (1 << 23) <= sig < (1 << 24), x
        code = (e + 127) << 23 | (int(sig) - (1 << 23))
    else:
        sig = x / Fraction(2) ** -149
        assert sig.denominator == 1 and sig < (1 << 23), x
        code = int(sig)
    return code | (neg << 31)


def fp32_value(code):
    cls, neg, m = F32.dec(code)
    return (cls, neg, m, F32.S)


def grid(f):
    """Non-negative finite values of f in increasing order, as Fractions, plus the first value above max."""
    vals = set()
    for code in range(1 << f.bits):
        cls, neg, m = f.dec(code)
        if cls == 0 and not neg:
            vals.add(Fraction(m) * Fraction(2) ** f.S)
    vals = sorted(vals)
    top = vals[-1]
    if f.kind == "float":
        nxt = top + Fraction(2) ** f.maxq
    elif f.kind == "int":
        nxt = top + 1
    else:
        nxt = top * 2
    return vals + [nxt]


def fp32_neighbours(code):
    """code and its fp32 neighbours one ulp either side in magnitude (same sign)."""
    out = [code]
    mag = code & 0x7FFFFFFF
    if mag > 0:
        out.append(code - 1)
    if mag < 0x7F7FFFFF:
        out.append(code + 1)
    return out


FP32_SPECIALS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                 0xFFBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
                 0x3F800000, 0xBF800000, 0x4F000000, 0x5F000000, 0x1F000000, 0x0F000000]


def boundary_codes(f, limit=None, rng=None):
    """fp32 patterns at every rounding boundary of f: each grid value, each midpoint between adjacent
    values (also above max) with its fp32 neighbours one ulp either side; both signs."""
    g = grid(f)
    pts = []
    pairs = list(range(len(g) - 1))
    if limit is not None and len(pairs) > limit:
        pairs = sorted(rng.sample(pairs, limit))
    for i in pairs:
        lo, hi = g[i], g[i + 1]
        pts.append((lo, False))
        pts.append(((lo + hi) / 2, True))
    pts.append((g[-1], True))
    pts.append((g[-1] * 2, True))
    codes = set()
    for x, nb in pts:
        if x > F32.maxval():
            continue
        c = fp32_bits_of(False, x)
        for cc in fp32_neighbours(c) if nb else [c]:
            codes.add(cc)
            codes.add(cc | 0x80000000)
    codes.update(FP32_SPECIALS)
    return sorted(codes)


# ----------------------------------------------------------------------------------------------
# Check groups. Each task returns (group, cases, disagreements, first disagreements).

SETTINGS_ALL = [(m, o, fl) for fl in (False, True) for (m, o) in COMBOS]


def task_pairs(fname, op, quick):
    """All ordered pairs of codes of an 8/6/4-bit format, as add, sub or mul, in every setting."""
    f = FMTS[fname]
    ncode = 1 << f.bits
    lines = ["%s %s" % (f.hx(a), f.hx(b)) for a in range(ncode) for b in range(ncode)]
    settings = SETTINGS_ALL if not quick else [s for s in SETTINGS_ALL if s[0] in ("rne", "rdn")]
    bad = []
    cases = dis = 0
    for flush in (False, True):
        vals = [decode_v(f, c, flush) for c in range(ncode)]
        bvals = [v_neg(v) for v in vals] if op == "sub" else vals
        exact = {}  # the exact results, pair by pair; sums differ between rdn and the rest (zero sign)
        for mode, ovf, fl in settings:
            if fl != flush:
                continue
            key = mode == "rdn" if op != "mul" else False
            if key not in exact:
                m = "rdn" if key else "rne"
                if op == "mul":
                    exact[key] = [v_mul(a, b) for a in vals for b in bvals]
                else:
                    exact[key] = [v_add(a, b, m) for a in vals for b in bvals]
            rs = exact[key]
            ieee = ovf == "ieee"
            rounded = {r: round_val(r, f, mode, ieee, flush) for r in set(rs)}
            exp = list(map(rounded.__getitem__, rs))
            c, d = check_batch(op, fname, lines, [((mode, ovf, flush), exp)], bad)
            cases += c
            dis += d
    return ("pairs %s %s" % (fname, op), cases, dis, bad)


def task_cast8(fname, quick):
    """Every code of an 8/6/4-bit format cast to every 8/6/4-bit format (identity included)."""
    a = FMTS[fname]
    lines = [a.hx(c) for c in range(1 << a.bits)]
    bad = []
    cases = dis = 0
    # Flush is exercised in every mode by the pair checks; here under rne (both overflow modes).
    settings = [s for s in SETTINGS_ALL if not s[2] or s[0] == "rne"]
    if quick:
        settings = [s for s in settings if s[0] in ("rne", "rup")]
    for bname in EIGHT + SMALL:
        b = FMTS[bname]
        work = []
        for mode, ovf, flush in settings:
            exp = [round_val(decode_v(a, c, flush), b, mode, ovf == "ieee", flush) for c in range(1 << a.bits)]
            work.append(((mode, ovf, flush), exp))
        c, d = check_batch("cast", bname, lines, work, bad, extra=("--in-format", fname))
        cases += c
        dis += d
    return ("cast %s -> 8/6/4-bit" % fname, cases, dis, bad)


def task_cast_fp32(fname, quick, limit=None):
    """Casts from fp32 into fname: every rounding boundary of fname (each grid value and each
    midpoint between adjacent values, also above max, with their fp32 neighbours), the fp32 patterns
    of every 8/6/4-bit value, and fp32 specials. For the wide formats the flush settings are run on
    the part of the range where flushing can matter (below 4x the smallest normal, and specials)."""
    f = FMTS[fname]
    rng = random.Random(sum(map(ord, fname)))
    codes = set(boundary_codes(f, limit, rng))
    if f.bits <= 8:
        for src in EIGHT + SMALL:
            s = FMTS[src]
            for c in range(1 << s.bits):
                cls, neg, m = s.dec(c)
                if cls == 0:
                    codes.add(fp32_bits_of(neg, Fraction(m) * Fraction(2) ** s.S))
    codes = sorted(codes)
    if f.bits <= 8 or f.kind != "float":
        low = codes
    else:
        lim = fp32_bits_of(False, Fraction(4) * Fraction(2) ** f.emin)
        low = [c for c in codes if (c & 0x7FFFFFFF) <= lim] + FP32_SPECIALS
    settings = SETTINGS_ALL if not quick else [s for s in SETTINGS_ALL if s[0] in ("rne", "rup")]
    bad = []
    cases = dis = 0
    for flush in (False, True):
        cs = low if flush else codes
        lines = ["%08x" % c for c in cs]
        vals = [decode_v(F32, c, flush) for c in cs]
        work = []
        for mode, ovf, fl in settings:
            if fl == flush:
                ieee = ovf == "ieee"
                work.append(((mode, ovf, flush), [round_val(v, f, mode, ieee, flush) for v in vals]))
        c, d = check_batch("cast", fname, lines, work, bad, extra=("--in-format", "fp32"))
        cases += c
        dis += d
    return ("cast fp32 -> %s (boundaries)" % fname, cases, dis, bad)


def rand_code(rng, f, near=None):
    """A random code of f: uniform bits, or (near = a code) one whose exponent field is within
    M+3 of near's so that sums cancel and ties occur."""
    if near is None or f.kind != "float":
        return rng.getrandbits(f.bits)
    field = (near >> f.M) & ((1 << f.E) - 1)
    nf = field + rng.randint(-(f.M + 3), f.M + 3)
    nf = max(0, min((1 << f.E) - 1, nf))
    return rng.getrandbits(1) << (f.bits - 1) | nf << f.M | rng.getrandbits(f.M)


def moderate_code(rng, f, span):
    """A random finite code of f with exponent within +-span of 0."""
    field = f.bias + rng.randint(-span, span)
    return rng.getrandbits(1) << (f.bits - 1) | field << f.M | rng.getrandbits(f.M)


def task_random(fname, op, mode, n, seed, flush_too=True):
    """n random operand tuples of fname for op in one rounding mode, half with each overflow mode
    (and a tenth under flush); half uniform bit patterns, half with close exponents."""
    f = FMTS[fname]
    rng = random.Random(seed)
    nops = 3 if op == "fma" else 2
    bad = []
    cases = dis = 0
    plan = [("saturate", False, n // 2), ("ieee", False, n - n // 2)]
    if flush_too:
        plan.append(("ieee", True, max(n // 10, 1000)))
    for ovf, flush, cnt in plan:
        tuples = []
        for i in range(cnt):
            kind = i % 4
            if kind == 0:
                t = [rng.getrandbits(f.bits) for _ in range(nops)]
            elif kind == 1:
                a = rng.getrandbits(f.bits)
                t = [a, rand_code(rng, f, a), rand_code(rng, f, a)][:nops]
            else:
                span = 20 if f.E >= 8 else (1 << (f.E - 1)) - 2
                a = moderate_code(rng, f, span)
                b = rand_code(rng, f, a) if kind == 2 else moderate_code(rng, f, span)
                t = [a, b]
                if nops == 3:
                    # c near the product's exponent, so that a*b+c cancels.
                    fa = (a >> f.M) & ((1 << f.E) - 1)
                    fb = (b >> f.M) & ((1 << f.E) - 1)
                    fc = fa + fb - f.bias + rng.randint(-3, 3)
                    if 0 < fc < (1 << f.E) - 1:
                        c = rng.getrandbits(1) << (f.bits - 1) | fc << f.M | rng.getrandbits(f.M)
                    else:
                        c = rng.getrandbits(f.bits)
                    t.append(c)
            tuples.append(t)
        lines = [" ".join(f.hx(x) for x in t) for t in tuples]
        exp = []
        ieee = ovf == "ieee"
        for t in tuples:
            v = [decode_v(f, x, flush) for x in t]
            if op == "add":
                r = v_add(v[0], v[1], mode)
            elif op == "sub":
                r = v_add(v[0], v_neg(v[1]), mode)
            elif op == "mul":
                r = v_mul(v[0], v[1])
            else:
                r = v_add(v_mul(v[0], v[1]), v[2], mode)
            exp.append(round_val(r, f, mode, ieee, flush))
        c, d = check_batch(op, fname, lines, [((mode, ovf, flush), exp)], bad)
        cases += c
        dis += d
    return ("random %s %s" % (fname, op), cases, dis, bad)


def task_mixed(quick):
    """Exact sums and products of 8-bit pairs rounded to wider and narrower formats (--out-format)."""
    bad = []
    cases = dis = 0
    rng = random.Random(7)
    for fname, outs in [("fp8_e4m3", ["bf16", "fp16", "fp4_e2m1"]), ("fp8_e5m2", ["fp16", "fp8_e4m3"])]:
        f = FMTS[fname]
        pairs = [(a, b) for a in range(256) for b in range(256)]
        if quick:
            pairs = rng.sample(pairs, 4000)
        lines = ["%s %s" % (f.hx(a), f.hx(b)) for a, b in pairs]
        vals = [decode_v(f, c, False) for c in range(256)]
        for op in ("mul", "add"):
            for oname in outs:
                o = FMTS[oname]
                work = []
                for mode in MODES:
                    if op == "mul":
                        rs = [v_mul(vals[a], vals[b]) for a, b in pairs]
                    else:
                        rs = [v_add(vals[a], vals[b], mode) for a, b in pairs]
                    rounded = {r: round_val(r, o, mode, True, False) for r in set(rs)}
                    work.append(((mode, "ieee", False), list(map(rounded.__getitem__, rs))))
                c, d = check_batch(op, fname, lines, work, bad, extra=("--out-format", oname))
                cases += c
                dis += d
    return ("8-bit ops -> other --out-format", cases, dis, bad)


def task_sr_exact(quick):
    """Stochastic rounding, bit for bit: drift's words are Philox4x32-10(key = seed, counter = line/4)."""
    bad = []
    cases = dis = 0
    rng = random.Random(11)
    n = 600 if quick else 3000
    for bits in (1, 3, 8, 16, 24, 32):
        seed = rng.getrandbits(64)
        words = random_words(seed, n)
        sr = ["--sr-bits", str(bits), "--seed", str(seed)]
        # Casts from fp32 into narrow formats.
        for oname in ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp4_e2m1", "int8", "e8m0"]:
            o = FMTS[oname]
            codes = []
            for i in range(n):
                if i % 8 == 0:
                    codes.append(rng.getrandbits(32))
                else:
                    span = 20 if o.kind != "float" else min(o.bias + 2, 40)
                    codes.append(moderate_code(rng, F32, span))
            lines = ["%08x" % c for c in codes]
            for ovf in OVERFLOWS:
                exp = [round_val(decode_v(F32, c, False), o, "sr", ovf == "ieee", False, bits, words[i])
                       for i, c in enumerate(codes)]
                c, d = check_batch("cast", oname, lines, [(("sr", ovf, False), exp)], bad,
                                   extra=["--in-format", "fp32"] + sr)
                cases += c
                dis += d
        # Sums and products.
        for fname, op in [("fp8_e4m3", "add"), ("fp8_e5m2", "mul"), ("bf16", "add"), ("fp16", "mul"),
                          ("fp32", "add"), ("fp32", "fma"), ("fp6_e2m3", "mul"), ("e8m0", "add")]:
            f = FMTS[fname]
            nops = 3 if op == "fma" else 2
            tuples = []
            for i in range(n):
                a = rng.getrandbits(f.bits)
                tuples.append([a] + [rand_code(rng, f, a) for _ in range(nops - 1)])
            lines = [" ".join(f.hx(x) for x in t) for t in tuples]
            exp = []
            for i, t in enumerate(tuples):
                v = [decode_v(f, x, False) for x in t]
                if op == "add":
                    r = v_add(v[0], v[1], "sr")
                elif op == "mul":
                    r = v_mul(v[0], v[1])
                else:
                    r = v_add(v_mul(v[0], v[1]), v[2], "sr")
                exp.append(round_val(r, f, "sr", True, False, bits, words[i]))
            c, d = check_batch(op, fname, lines, [(("sr", "ieee", False), exp)], bad, extra=sr)
            cases += c
            dis += d
    return ("sr exact (Philox words)", cases, dis, bad)


def task_sr_stats(quick):
    """Statistics of stochastic rounding: every result is one of the two neighbours, and the mean of
    N roundings of x lies within quantum * 2^-b (the bias of b-bit sr) + z * quantum / (2 sqrt N)
    (z = 5 standard errors; the spread of one rounding is at most quantum/2) of x."""
    bad = []
    cases = dis = 0
    N = 20000 if quick else 100000
    z = 5
    seed = 0x5EED
    # (fp32 pattern, target): values with various fractions of a quantum.
    items = [(0x3F80_0001 + 0x2A, "bf16"), (0x3EAAAAAB, "bf16"), (0x3DCCCCCD, "fp16"), (0x3EAAAAAB, "fp8_e4m3"),
             (0xC0490FDB, "fp8_e5m2"), (0x3F2AAAAB, "fp4_e2m1"), (0x42C80CCD, "int8")]
    for bits in (1, 8, 24, 32):
        for code, oname in items:
            o = FMTS[oname]
            cls, neg, m = F32.dec(code)
            x = Fraction(m) * Fraction(2) ** F32.S
            # The two neighbours: round toward zero and away.
            lo_s = round_val(decode_v(F32, code, False), o, "rtz", False, False)
            hi_s = round_val(decode_v(F32, code, False), o, "rup" if not neg else "rdn", False, False)
            dec = {}
            for s in (lo_s, hi_s):
                c2, n2, m2 = o.dec(int(s, 16))
                dec[s] = Fraction(m2) * Fraction(2) ** o.S * (-1 if n2 else 1)
            quantum = abs(dec[hi_s] - dec[lo_s])
            lines = ["%08x" % code] * N
            args = ["--op", "cast", "--in-format", "fp32", "--format", oname, "--rounding", "sr", "--sr-bits",
                    str(bits), "--seed", str(seed)]
            desc = "sr stats %08x -> %s b=%d" % (code, oname, bits)
            try:
                got = drift(args, lines)
            except RuntimeError as ex:
                bad.append((desc, "output", str(ex)))
                dis += 1
                continue
            cases += N
            cnt = {}
            for g in got:
                cnt[g] = cnt.get(g, 0) + 1
            others = [g for g in cnt if g not in dec]
            if others or len(got) != N:
                dis += 1
                bad.append((desc, "only %s or %s" % (lo_s, hi_s), "also %s" % others[:3]))
                continue
            mean = Fraction(sum(dec[s] * c for s, c in cnt.items())) / N
            sx = -x if neg else x
            err = abs(mean - sx)
            bias = quantum / (1 << bits) if bits < 64 else 0
            excess = max(Fraction(0), err - bias)
            # excess <= z * quantum / (2 sqrt N)  <=>  4 N excess^2 <= z^2 quantum^2
            if 4 * N * excess * excess > z * z * quantum * quantum:
                dis += 1
                bad.append((desc, "|mean - x| <= %s quantum" % "q*2^-b + 5 se",
                            "|mean - x| = %s quantum" % (err / quantum).limit_denominator(10 ** 6)))
    return ("sr statistics (mean converges, neighbours only)", cases, dis, bad)


def task_philox():
    n, bad = philox_kat()
    return ("philox4x32-10 known answers (oracle self-check)", n, len(bad), bad)


# ----------------------------------------------------------------------------------------------


def run_task(t):
    fn, args = t
    t0 = time.monotonic()
    try:
        res = globals()[fn](*args)
    except Exception as ex:  # a crash in one group is a failure of that group, not of the run
        import traceback
        res = ("%s%s" % (fn, args), 0, 1, [("exception", "", traceback.format_exc()[-800:])])
    return res + (time.monotonic() - t0,)


def init_worker(path):
    global DRIFT
    DRIFT = path


def build_tasks(quick):
    tasks = [("task_philox", ())]
    for fname in EIGHT:
        for op in ("add", "mul", "sub"):
            tasks.append(("task_pairs", (fname, op, quick)))
    for fname in SMALL:
        for op in ("add", "mul", "sub"):
            tasks.append(("task_pairs", (fname, op, quick)))
    for fname in EIGHT + SMALL:
        tasks.append(("task_cast8", (fname, quick)))
        tasks.append(("task_cast_fp32", (fname, quick)))
    for fname in ("fp16", "bf16"):
        tasks.append(("task_cast_fp32", (fname, quick)))
    tasks.append(("task_cast_fp32", ("tf32", quick, 3000 if quick else 8000)))
    n16 = 20000 if quick else 200000
    n32 = 10000 if quick else 40000
    seed = 1000
    for fname in ("fp16", "bf16"):
        for op in ("add", "mul"):
            for mode in MODES:
                seed += 1
                tasks.append(("task_random", (fname, op, mode, n16, seed)))
    for op in ("add", "mul", "fma"):
        for mode in MODES:
            seed += 1
            tasks.append(("task_random", ("fp32", op, mode, n32, seed)))
    tasks.append(("task_mixed", (quick,)))
    tasks.append(("task_sr_exact", (quick,)))
    tasks.append(("task_sr_stats", (quick,)))
    # Longest first, so that the two workers finish together.
    heavy = ("task_random", "task_mixed", "task_sr")
    tasks.sort(key=lambda t: (0 if t[0].startswith(heavy) or t[1][:1] in (("fp16",), ("bf16",), ("tf32",)) else 1))
    return tasks


def group_of(name):
    # Aggregate per-format tasks into the groups of the report.
    for prefix in ("random fp16", "random bf16", "random fp32"):
        if name.startswith(prefix):
            return name
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drift", required=True, help="path to the drift binary")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="fewer cases (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated substrings of task names to run")
    ns = ap.parse_args()
    t0 = time.monotonic()
    tasks = build_tasks(ns.quick)
    if ns.only:
        keys = ns.only.split(",")
        tasks = [t for t in tasks if any(k in "%s%s" % t for k in keys)]
    results = {}
    with multiprocessing.Pool(ns.jobs, initializer=init_worker, initargs=(ns.drift,)) as pool:
        for name, cases, dis, bad, secs in pool.imap_unordered(run_task, tasks):
            g = results.setdefault(group_of(name), [0, 0, [], 0])
            g[0] += cases
            g[1] += dis
            g[2].extend(bad[: SHOW - len(g[2])] if len(g[2]) < SHOW else [])
            g[3] += secs
    total_cases = total_dis = 0
    for name in sorted(results):
        cases, dis, bad, secs = results[name]
        total_cases += cases
        total_dis += dis
        print("%-52s %9d cases %7d disagreements  (%.1fs)" % (name, cases, dis, secs))
        for inp, e, g in bad:
            print("    input: %s\n      expected: %s\n      got:      %s" % (inp, e, g))
    print("TOTAL %d cases, %d disagreements, %.1fs wall" % (total_cases, total_dis, time.monotonic() - t0))
    sys.stdout.flush()
    return 1 if total_dis else 0


if __name__ == "__main__":
    sys.exit(main())
