#!/usr/bin/env python3
"""Searches tensor-core accumulation models against measured vectors (data/tensorcore layout).

For one vector directory (a_*.txt, b_*.txt, c_*_fp32.txt, d_*_fp32|fp16.txt) this tries every
combination of the candidate parameters below and prints, per combination, how many of the
measured results it reproduces bit for bit, best first, with a summary of how the best ones miss
(by how many units in the last place, in which direction). It is an analysis tool: drift's own
model (src/arith/fused_accum.h) is what the tests check; this file re-derives candidates
independently, in exact integer arithmetic (no floating point anywhere), so that a preset's
parameters are chosen from the measurements rather than guessed.

The model family (the block FMA of the published models, with each choice made a parameter):
  * the products a_i*b_i are exact; a product's alignment exponent is e(a_i) + e(b_i), each e the
    exponent of the leading bit clamped below at the input format's emin (significand not
    renormalised);
  * the K products are cut into groups of `terms` (`pattern`: consecutive, or two groups per block
    of 2*terms with the products dealt in alternating runs of r), chained through the running sum;
  * `c`: how the running sum enters a group: `align` (its exponent takes part in the maximum E and
    it is cut like a product), `late` (products aligned among themselves, c added exactly before
    the one rounding), `after` (the group's products rounded on their own to the result grid, then
    c added with one IEEE round-to-nearest-even addition in the output format), `end` (the chain
    of groups started from zero, then c added with one such addition);
  * every term is cut at 2^(E - kept) with `cut` = rtz (sign-magnitude truncation), floor
    (two's complement truncation: toward -inf) or rne; E is clamped below at `min_align`;
  * the exact sum is normalised once and rounded to `out_bits` fraction bits in the output format
    (`final` = rtz, rne, rna, away, floor, ceil), subnormals kept.

Usage: scripts/tc_model_search.py DIR [--output fp32|fp16] [--c file|zero] [--top 12] [--quick]
       [--only 'terms=32,kept=25'] (restrict a parameter to listed values; ',' within, ';' between)
"""

import argparse
import glob
import itertools
import os
import sys
from collections import Counter

FORMATS = {  # name: (exponent bits, fraction bits, emin)
    "fp32": (8, 23, -126),
    "fp16": (5, 10, -14),
    "bf16": (8, 7, -126),
    "tf32": (8, 10, -126),
    "E4M3": (4, 3, -6),
    "E5M2": (5, 2, -14),
}


def decode32(bits):
    """binary32 bits -> (neg, sig, exp) with value (-1)^neg * sig * 2^exp; finite values only."""
    neg = bits >> 31
    field = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    if field == 0xFF:
        raise ValueError("non-finite value %08x" % bits)
    if field == 0:
        return neg, frac, -149
    return neg, frac | 0x800000, field - 150


def lead(sig, exp):
    return sig.bit_length() - 1 + exp


def read_dir(d, output, c_zero):
    def one(pattern):
        hits = glob.glob(os.path.join(d, pattern))
        if len(hits) != 1:
            sys.exit("%s: expected one file %s, found %d" % (d, pattern, len(hits)))
        return hits[0]

    a_path, b_path = one("a_*.txt"), one("b_*.txt")
    fmt = os.path.basename(a_path)[:-4].split("_")[-1]
    rows_a = [[int(t, 16) for t in line.split()] for line in open(a_path) if line.strip()]
    rows_b = [[int(t, 16) for t in line.split()] for line in open(b_path) if line.strip()]
    rows_d = [int(line.strip(), 2) for line in open(one("d_*_%s.txt" % output)) if line.strip()]
    if c_zero:
        rows_c = [0] * len(rows_a)
    else:
        rows_c = [int(line.strip(), 2) for line in open(one("c_*_fp32.txt")) if line.strip()]
    return fmt, rows_a, rows_b, rows_c, rows_d


# ---- exact rounding ----------------------------------------------------------------------------


def round_to(neg, mag, lsb, man_bits, emin, mode):
    """(-1)^neg * mag * 2^lsb rounded to a grid of man_bits fraction bits with minimum exponent emin
    (subnormals kept, no upper limit). Returns (neg, mag', lsb')."""
    if mag == 0:
        return neg, 0, 0
    e = lead(mag, lsb)
    q = max(e, emin) - man_bits  # weight of the last kept bit
    shift = q - lsb
    if shift <= 0:
        return neg, mag, lsb
    kept, rest = mag >> shift, mag & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    up = False
    if rest:
        if mode == "rtz":
            up = False
        elif mode == "away":
            up = True
        elif mode == "rne":
            up = rest > half or (rest == half and kept & 1)
        elif mode == "rna":
            up = rest >= half
        elif mode == "floor":
            up = bool(neg)
        elif mode == "ceil":
            up = not neg
        else:
            raise ValueError(mode)
    return neg, kept + (1 if up else 0), q


def signed_round(v, lsb, man_bits, emin, mode):
    neg, mag, l = round_to(1 if v < 0 else 0, abs(v), lsb, man_bits, emin, mode)
    return (-mag if neg else mag), l


def to_common(pairs):
    """Sum of signed (value, lsb) pairs as one exact (value, lsb)."""
    pairs = [(v, l) for v, l in pairs if v]
    if not pairs:
        return 0, 0
    lo = min(l for _, l in pairs)
    return sum(v << (l - lo) for v, l in pairs), lo


def cut_term(v, lsb, q, mode):
    """Signed v * 2^lsb cut to a multiple of 2^q: returns the multiple."""
    shift = q - lsb
    if shift <= 0:
        return v << (-shift)
    if mode == "floor":
        return v >> shift
    mag = abs(v)
    kept, rest = mag >> shift, mag & ((1 << shift) - 1)
    if mode == "rne":
        half = 1 << (shift - 1)
        if rest > half or (rest == half and kept & 1):
            kept += 1
    elif mode != "rtz":
        raise ValueError(mode)
    return -kept if v < 0 else kept


# ---- the candidate model -----------------------------------------------------------------------


def group_positions(k, terms, pattern):
    """Lists of product indices, one per group, in chain order."""
    if pattern == 0:
        return [list(range(s, min(k, s + terms))) for s in range(0, k, terms)]
    r, block, out = pattern, 2 * terms, []
    for s in range(0, k, block):
        for h in range(2):
            out.append([i for i in range(s, min(k, s + block)) if ((i - s) // r) % 2 == h])
    return out


def evaluate(case, p, in_emin, out_bits_fmt, out_emin):
    products, c = case  # products: [(value, lsb, align_exp or None)], c: (value, lsb)
    if p["c"] == "end":  # the chain of groups from zero (c aligned within it), then c + chain, IEEE rne
        chain = evaluate((products, (0, 0)), dict(p, c="align"), in_emin, out_bits_fmt, out_emin)
        tot_v, tot_l = to_common([chain, c])
        return signed_round(tot_v, tot_l, out_bits_fmt, out_emin, "rne")
    acc_v, acc_l = c
    for grp in group_positions(len(products), p["terms"], p["pattern"]):
        terms = [products[i] for i in grp if products[i][0]]
        E = None
        for v, l, e in terms:
            E = e if E is None or e > E else E
        c_v, c_l = acc_v, acc_l
        if p["c"] == "align" and c_v:
            ec = max(lead(abs(c_v), c_l), out_emin)
            E = ec if E is None or ec > E else E
        if E is None:  # no products: the running sum passes through
            continue
        E = max(E, p["min_align"])
        q = E - p["kept"]
        s = sum(cut_term(v, l, q, p["cut"]) for v, l, e in terms)
        if p["c"] == "align":
            s += cut_term(c_v, c_l, q, p["cut"]) if c_v else 0
            acc_v, acc_l = signed_round(s, q, p["out_bits"], out_emin, p["final"])
        elif p["c"] == "late":
            tot_v, tot_l = to_common([(s, q), (c_v, c_l)])
            acc_v, acc_l = signed_round(tot_v, tot_l, p["out_bits"], out_emin, p["final"])
        else:  # after: the group rounded on its own, then c + group in IEEE rne of the output format
            g_v, g_l = signed_round(s, q, p["out_bits"], out_emin, p["final"])
            tot_v, tot_l = to_common([(g_v, g_l), (c_v, c_l)])
            acc_v, acc_l = signed_round(tot_v, tot_l, out_bits_fmt, out_emin, "rne")
    return acc_v, acc_l


def same(x, y):
    (xv, xl), (yv, yl) = x, y
    if xv == 0 or yv == 0:
        return xv == 0 and yv == 0
    lo = min(xl, yl)
    return xv << (xl - lo) == yv << (yl - lo)


def ulps(got, want, out_bits_fmt, out_emin):
    """(want - got) in units of want's last place (sign: + when the GPU is larger in magnitude)."""
    (gv, gl), (wv, wl) = got, want
    d_v, d_l = to_common([(wv, wl), (-gv, gl)])
    ref = wv if wv else gv
    if ref == 0:
        return 0
    e = max(lead(abs(ref), wl if wv else gl), out_emin)
    ulp = e - out_bits_fmt
    sgn = -1 if ref < 0 else 1
    # d in ulps, as a rational rounded to 1/4 for display
    num = d_v * sgn
    shift = d_l - ulp
    val = num * (2.0**shift) if abs(shift) < 1000 else float("inf")
    return round(val * 4) / 4


def prepare(fmt, rows_a, rows_b, rows_c, rows_d, output):
    in_emin = FORMATS[fmt][2]
    _, out_bits_fmt, out_emin = FORMATS[output]
    cases, wants = [], []
    for ra, rb, rc, rd in zip(rows_a, rows_b, rows_c, rows_d):
        prods = []
        for x, y in zip(ra, rb):
            nx, sx, lx = decode32(x)
            ny, sy, ly = decode32(y)
            if sx == 0 or sy == 0:
                prods.append((0, 0, None))
                continue
            e = max(lead(sx, lx), in_emin) + max(lead(sy, ly), in_emin)
            v = sx * sy
            prods.append((-v if nx != ny else v, lx + ly, e))
        nc, sc, lc = decode32(rc)
        if output == "fp16":  # the harness converts c to fp16 with round to nearest even
            nc, sc, lc = round_to(nc, sc, lc, 10, -14, "rne")
        cases.append((prods, (-sc if nc else sc, lc)))
        nd, sd, ld = decode32(rd)
        wants.append((-sd if nd else sd, ld))
    return cases, wants, in_emin, out_bits_fmt, out_emin


def score(p, cases, wants, in_emin, out_bits_fmt, out_emin, keep_misses=False):
    hits, misses = 0, []
    for i, (case, want) in enumerate(zip(cases, wants)):
        got = evaluate(case, p, in_emin, out_bits_fmt, out_emin)
        if same(got, want):
            hits += 1
        elif keep_misses:
            misses.append((i + 1, ulps(got, want, out_bits_fmt, out_emin)))
    return hits, misses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--output", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--c", default="file", choices=["file", "zero"])
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--cases", type=int, default=0, help="use only the first N cases (0: all)")
    ap.add_argument("--only", default="", help="e.g. 'terms=16,32;kept=24,25,26'")
    ap.add_argument("--screen", type=int, default=200, help="cases every candidate is screened on (0: all)")
    args = ap.parse_args()

    fmt, ra, rb, rc, rd = read_dir(args.dir, args.output, args.c == "zero")
    if args.cases:
        ra, rb, rc, rd = ra[: args.cases], rb[: args.cases], rc[: args.cases], rd[: args.cases]
    cases, wants, in_emin, out_bits_fmt, out_emin = prepare(fmt, ra, rb, rc, rd, args.output)
    k = len(cases[0][0])
    space = {
        "terms": [t for t in (4, 8, 16, 32) if t <= k and k % t == 0],
        "pattern": [0, 1, 2, 4, 8],
        "kept": list(range(out_bits_fmt - 4, out_bits_fmt + 6)),
        "cut": ["rtz", "floor", "rne"],
        "c": ["align", "late", "after", "end"],
        "final": ["rtz", "rne", "rna", "away"],
        "out_bits": [out_bits_fmt],
        "min_align": [-133],
    }
    for clause in filter(None, args.only.split(";")):
        key, vals = clause.split("=")
        conv = str if key.strip() in ("cut", "c", "final") else int
        space[key.strip()] = [conv(v) for v in vals.split(",")]
    keys = list(space)
    combos = []
    for combo in itertools.product(*(space[k_] for k_ in keys)):
        p = dict(zip(keys, combo))
        if p["pattern"] and (p["terms"] % p["pattern"] or 2 * p["terms"] > k or p["pattern"] >= p["terms"]):
            continue
        combos.append(p)
    # Screen every candidate on the first cases, then score the best on all of them.
    m = min(args.screen, len(cases)) if args.screen else len(cases)
    screened = sorted(((score(p, cases[:m], wants[:m], in_emin, out_bits_fmt, out_emin)[0], i) for i, p in enumerate(combos)),
                      key=lambda r: -r[0])
    results = []
    for _, i in screened[: max(args.top * 3, 30)]:
        results.append((score(combos[i], cases, wants, in_emin, out_bits_fmt, out_emin)[0], combos[i]))
    results.sort(key=lambda r: -r[0])
    n = len(cases)
    print("%s, %s output, c %s: %d cases of K = %d; %d candidate models screened on %d cases" %
          (args.dir, args.output, args.c, n, k, len(combos), m))
    for hits, p in results[: args.top]:
        print("%5d/%d  %s" % (hits, n, " ".join("%s=%s" % (k_, p[k_]) for k_ in keys)))
    best = results[0][1]
    _, misses = score(best, cases, wants, in_emin, out_bits_fmt, out_emin, keep_misses=True)
    if misses:
        hist = Counter(u for _, u in misses)
        print("best model's misses by (GPU - model) in ulps of the result, + = GPU larger in magnitude:")
        print("  " + ", ".join("%+g: %d" % (u, c) for u, c in sorted(hist.items())))
        print("  first lines: " + ", ".join(str(l) for l, _ in misses[:10]))


if __name__ == "__main__":
    main()
