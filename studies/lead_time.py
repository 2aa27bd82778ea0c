#!/usr/bin/env python3
"""Does the gradient norm grow before the loss diverges, and by how many steps?

    python3 studies/lead_time.py SWEEP_DIR [--growth 4] [--format markdown|json]

For every run of a `drift sweep` directory (SWEEP_DIR/sweep.json) reads metrics.jsonl and
summary.json and prints one row: the divergence step and reason drift recorded, the loss peak, the
gradient-norm onset and the lead = divergence step - onset.

Onset (diverged runs only): the logged step with the smallest global gradient norm (before
clipping) in the WINDOW steps before the divergence step, when the norm logged at divergence is at
least GROWTH times that trough: the start of the growth the loss event follows. No onset when the
norm did not grow that much (the loss diverged without warning from the gradient). Defaults:
WINDOW 200, GROWTH 4. For every run also the largest logged norm after warmup and its ratio to the
median logged norm after warmup, which says how far the gradient strayed in runs that survived.
Only logged steps (train.log_every) are seen, so onsets and leads are multiples of it.
"""
import argparse
import json
import math
import os
import sys


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def analyse(run_dir, growth, window):
    metrics = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    with open(os.path.join(run_dir, "config.json")) as f:
        warmup = json.load(f)["train"].get("warmup", 0)
    summary_path = os.path.join(run_dir, "summary.json")
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {}
    peak_loss, peak_step = -math.inf, None
    norms = []  # (step, norm) after warmup, finite
    for m in metrics:
        step, norm, loss = m["step"], m.get("grad_norm"), m.get("loss")
        if step < warmup:
            continue
        if loss is not None and math.isfinite(loss) and loss > peak_loss:
            peak_loss, peak_step = loss, step
        if norm is not None and math.isfinite(norm):
            norms.append((step, norm))
    div = summary.get("divergence_step")
    onset = None
    if div is not None:
        before = [(s, n) for s, n in norms if div - window <= s <= div]
        if before:
            trough_step, trough = min(before, key=lambda p: p[1])
            at_div = before[-1][1]
            if trough > 0 and at_div >= growth * trough:
                onset = trough_step
    max_norm = max((n for _, n in norms), default=None)
    sorted_norms = sorted(n for _, n in norms)
    median_norm = sorted_norms[len(sorted_norms) // 2] if sorted_norms else None
    return {
        "divergence_step": div,
        "reason": summary.get("reason"),
        "spike_step": summary.get("spike_step"),
        "first_nonfinite_step": summary.get("first_nonfinite_step"),
        "peak_loss": peak_loss if peak_step is not None else None,
        "peak_step": peak_step,
        "grad_norm_onset": onset,
        "lead_steps": (div - onset) if (div is not None and onset is not None) else None,
        "max_grad_norm": max_norm,
        "max_over_median_grad_norm": (max_norm / median_norm) if median_norm else None,
        "final_val_loss": summary.get("final_val_loss"),
    }


def fmt(v, digits=3):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep_dir")
    ap.add_argument("--growth", type=float, default=4.0)
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--format", choices=["markdown", "json"], default="markdown")
    args = ap.parse_args()
    try:
        plan = json.load(open(os.path.join(args.sweep_dir, "sweep.json")))
    except (OSError, ValueError) as e:
        sys.exit(f"lead_time.py: cannot read {args.sweep_dir}/sweep.json: {e}")
    rows = []
    for run in plan["runs"]:
        run_dir = os.path.join(args.sweep_dir, run["dir"])
        if not os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
            continue
        row = {"policy": run["policy"], "varying": run.get("varying", {}), "seed": run["seed"]}
        row.update(analyse(run_dir, args.growth, args.window))
        rows.append(row)
    if args.format == "json":
        json.dump({"growth": args.growth, "window": args.window, "runs": rows}, sys.stdout, indent=1)
        print()
        return
    print(f"Gradient-norm onset: the logged step of the smallest grad norm in the {args.window} steps before "
          f"the divergence step, when the norm at divergence is >= {args.growth:g} x it; lead = divergence "
          "step - onset. Max/median: the largest logged grad norm after warmup over the median.\n")
    print("| policy | setting | seed | divergence step (reason) | peak loss (step) | grad-norm onset | lead (steps) | max grad norm (x median) | final val loss |")
    print("| :-- | :-- | --: | :-- | :-- | --: | --: | --: | --: |")
    for r in rows:
        setting = ",".join(f"{k}={v}" for k, v in sorted(r["varying"].items())) or "—"
        div = "—" if r["divergence_step"] is None else f'{r["divergence_step"]} ({r["reason"]})'
        peak = "—" if r["peak_step"] is None else f'{fmt(r["peak_loss"])} ({r["peak_step"]})'
        print(f'| {r["policy"]} | {setting} | {r["seed"]} | {div} | {peak} | {fmt(r["grad_norm_onset"])} | '
              f'{fmt(r["lead_steps"])} | {fmt(r["max_grad_norm"])} ({fmt(r["max_over_median_grad_norm"], 2)}x) | {fmt(r["final_val_loss"], 4)} |')


if __name__ == "__main__":
    main()
