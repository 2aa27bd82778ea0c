#!/usr/bin/env python3
"""Clip rates of chosen matmul operands or elementwise tensors, per policy, from a sweep's runs.

    python3 studies/clip_rates.py SWEEP_DIR SITE.OPERAND [SITE.OPERAND ...] [--steps A:B]

SITE.OPERAND is a glob on `<site>.<operand>` as metrics.jsonl names them under "sites"
(e.g. 'block*.mlp.proj.forward.a', the tanh/gelu outputs entering the MLP's second matmul;
'block*.attn.value.forward.a', the softmax probabilities entering P.V; 'head.forward.a'), or under
"elementwise" (e.g. 'block*.ln.ln_weight'). For each policy (and --set setting) and pattern:
clipped elements / elements, summed over every logged step in the step range and every matching
site and seed (a rate over elements, not a mean of per-step fractions), and the same at the first
logged step of the range. --steps A:B keeps steps A <= step < B (default: all).
"""
import argparse
import fnmatch
import json
import os
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep_dir")
    ap.add_argument("patterns", nargs="+")
    ap.add_argument("--steps", default=":")
    args = ap.parse_args()
    lo, _, hi = args.steps.partition(":")
    lo = int(lo) if lo else 0
    hi = int(hi) if hi else 1 << 62
    try:
        plan = json.load(open(os.path.join(args.sweep_dir, "sweep.json")))
    except (OSError, ValueError) as e:
        sys.exit(f"clip_rates.py: cannot read {args.sweep_dir}/sweep.json: {e}")
    totals = defaultdict(lambda: [0, 0])  # (group, pattern) -> [clipped, elements]
    firsts = defaultdict(lambda: [0, 0])
    groups = []
    for run in plan["runs"]:
        path = os.path.join(args.sweep_dir, run["dir"], "metrics.jsonl")
        if not os.path.exists(path):
            continue
        setting = ",".join(f"{k}={v}" for k, v in sorted(run.get("varying", {}).items()))
        group = run["policy"] + (f" {setting}" if setting else "")
        if group not in groups:
            groups.append(group)
        first = True
        for line in open(path):
            m = json.loads(line)
            if not lo <= m["step"] < hi:
                continue
            counts = {}
            for site, ops in (m.get("sites") or {}).items():
                for op in ("a", "b"):
                    if isinstance(ops.get(op), dict):
                        counts[f"{site}.{op}"] = ops[op]
            for name, c in (m.get("elementwise") or {}).items():
                if isinstance(c, dict):
                    counts[name] = c
            for pat in args.patterns:
                for name, c in counts.items():
                    if fnmatch.fnmatchcase(name, pat):
                        totals[group, pat][0] += c.get("clipped", 0)
                        totals[group, pat][1] += c.get("elements", 0)
                        if first:
                            firsts[group, pat][0] += c.get("clipped", 0)
                            firsts[group, pat][1] += c.get("elements", 0)
            first = False
    print(f"Clipped elements / elements over logged steps {lo} <= step < {'end' if hi == 1 << 62 else hi} "
          "(and at the first logged step of that range), all seeds.\n")
    print("| policy | " + " | ".join(f"`{p}`" for p in args.patterns) + " |")
    print("| :-- | " + " | ".join("--:" for _ in args.patterns) + " |")
    for g in groups:
        cells = []
        for p in args.patterns:
            c, n = totals[g, p]
            fc, fn = firsts[g, p]
            cells.append("—" if n == 0 else f"{100 * c / n:.3g}% (first {100 * fc / fn:.3g}%)" if fn else f"{100 * c / n:.3g}%")
        print(f"| {g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
