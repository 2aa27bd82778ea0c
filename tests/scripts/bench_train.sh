#!/usr/bin/env bash
# drift bench train times `drift train`'s own loop and command: every model x policy row is there,
# its figures add up, PyTorch's figures are joined right, and the routes it reports per matmul site
# are the ones `drift train` takes for the same config, none of them the slow reference path for
# the fp32 and mxfp8_e4m3 presets (both meet the fast path's documented conditions: fp32 sequential
# accumulation, no product format, operands that fit in float). The sgemm reference runs on --threads
# threads whatever OpenBLAS read from the environment, and PyTorch rows timed on other threads are
# refused. No timing is asserted: speed is a benchmark's business, never a test's.
# Usage: bench_train.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

# Figures in the shape reference_pytorch.py --bench --json prints (made up: only the join is tested).
cat > torch.json <<'JSON'
[{"model": "mlp", "policy": "pytorch_fp32", "threads": 1, "steps": 5, "ms_per_step": 7.5, "steps_per_s": 133.3, "cpu_ms_per_step": 7.0, "blas_core": "Haswell"},
 {"model": "proxy", "policy": "pytorch_fp32", "threads": 1, "steps": 5, "ms_per_step": 90.0, "steps_per_s": 11.1, "cpu_ms_per_step": 80.0}]
JSON
OPENBLAS_NUM_THREADS=2 "$drift" bench train --threads 1 --steps 1 --models mlp proxy --e2e-steps 3 \
  --data "$src/data/austen/persuasion.txt" --pytorch torch.json --json > rows.json
python3 - rows.json <<'PY' || fail "bench train rows: $(cat rows.json)"
import json, sys
rows = json.load(open(sys.argv[1]))
assert [(r["model"], r["policy"]) for r in rows] == [("mlp", "fp32"), ("mlp", "mxfp8_e4m3"),
                                                    ("proxy", "fp32"), ("proxy", "mxfp8_e4m3")], rows
torch = {"mlp": (7.5, 7.0), "proxy": (90.0, 80.0)}
for r in rows:
    # Timed steps run from one logged step to another (log_every 10 by default): at least --steps.
    assert r["steps"] >= 1 and r["steps"] % 10 == 0 and r["threads"] == 1, r
    assert r["ms_per_step"] > 0 and r["cpu_ms_per_step"] > 0, r
    parts = r["forward_ms"] + r["backward_ms"] + r["update_ms"]
    assert parts <= r["ms_per_step"] * (1 + 1e-9), r                     # the phases lie inside the step
    assert abs(parts + r["other_ms"] - r["ms_per_step"]) <= 1e-9 * r["ms_per_step"], r
    assert abs(r["steps_per_s"] * r["ms_per_step"] - 1e3) < 1e-6, r
    assert abs(r["tokens_per_s"] - r["tokens_per_step"] * r["steps_per_s"]) <= 1e-9 * r["tokens_per_s"], r
    # The steps' matmul time lies inside the steps; the engine's time on the same shapes is measured.
    assert 0 < r["matmul_ms"] <= r["ms_per_step"] * (1 + 1e-9), r
    assert r["engine_matmul_ms"] > 0, r
    assert abs(r["matmul_efficiency"] - r["engine_matmul_ms"] / r["matmul_ms"]) <= 1e-12 * r["matmul_efficiency"], r
    # OpenBLAS on the same shapes (setup.sh installs it), and PyTorch's step over it: the bound.
    assert r["sgemm_matmul_ms"] > 0, r
    assert r["sgemm_threads"] == 1, r  # not the environment's 2
    assert abs(r["bound_vs_pytorch"] - torch[r["model"]][0] / r["sgemm_matmul_ms"]) <= 1e-12 * r["bound_vs_pytorch"], r
    # Per site and shape: they add up to the row's figures, and every site of the step is there, at
    # its one call per step (mlp and proxy have no per-head products).
    shapes = r["matmul_shapes"]
    for key in ("ms_per_step", "engine_ms_per_step", "sgemm_ms_per_step"):
        total = r[{"ms_per_step": "matmul_ms", "engine_ms_per_step": "engine_matmul_ms",
                   "sgemm_ms_per_step": "sgemm_matmul_ms"}[key]]
        assert abs(sum(sh[key] for sh in shapes) - total) <= 1e-9 * total, (key, r)
    assert sorted(sh["site"] for sh in shapes) == sorted(r["routes"]), r
    for sh in shapes:
        assert sh["m"] > 0 and sh["k"] > 0 and sh["n"] > 0 and sh["calls_per_step"] == 1, sh
        assert sh["ms_per_step"] > 0 and sh["engine_ms_per_step"] > 0 and sh["sgemm_ms_per_step"] > 0, sh
    assert r["tokens_per_step"] == 64, r  # predictions per step: one per window (mlp) or example (proxy), batch 64
    assert r["e2e_steps"] == 3 and r["e2e_wall_s"] > 0, r
    assert abs(r["e2e_tokens_per_s"] - 3 * r["tokens_per_step"] / r["e2e_wall_s"]) <= 1e-9 * r["e2e_tokens_per_s"], r
    ms, cpu = torch[r["model"]]
    assert r["pytorch_ms_per_step"] == ms and r["pytorch_cpu_ms_per_step"] == cpu, r
    # The BLAS kernels torch ran, where its row records them (mlp's here, not proxy's).
    assert r.get("pytorch_blas_core") == ("Haswell" if r["model"] == "mlp" else None), r
    assert abs(r["speed_vs_pytorch"] - ms / r["ms_per_step"]) <= 1e-12 * r["speed_vs_pytorch"], r
    assert abs(r["cpu_speed_vs_pytorch"] - cpu / r["cpu_ms_per_step"]) <= 1e-12 * r["cpu_speed_vs_pytorch"], r
    assert r["target"] == (2.0 if r["policy"] == "fp32" else 1.0), r
    assert r["target_met"] == (r["speed_vs_pytorch"] >= r["target"]), r
    assert r["fma_peak_gflops"] == rows[0]["fma_peak_gflops"] > 0, r  # this core's rate, once a run (fma_peak.h)
    # The step's matmul work: 2 m k n flops a call, over its shapes; under fp32 (a multiply per
    # product) its time at that peak, and PyTorch's step over it; not under MXFP8 (two products an
    # instruction in the pair kernel: the fp32 peak bounds nothing there).
    gflop = sum(2 * sh["m"] * sh["k"] * sh["n"] * sh["calls_per_step"] for sh in r["matmul_shapes"]) * 1e-9
    assert gflop > 0 and abs(r["matmul_gflop_per_step"] - gflop) <= 1e-12 * gflop, r
    # By hand for the proxy (batch 64, input 32, d 64, 4 blocks of 64 -> 256 -> 64, head 64 -> 8): the
    # forward's multiply-adds 64 (32*64 + 4*2*64*256 + 64*8) = 8,552,448; the backward's weight
    # gradients as many, its input gradients all but the input layer's, 8,421,376; two flops each.
    if r["model"] == "proxy":
        assert abs(r["matmul_gflop_per_step"] - 2 * (2 * 8552448 + 8421376) * 1e-9) <= 1e-12 * r["matmul_gflop_per_step"], r
    if r["policy"] == "fp32":
        assert abs(r["peak_matmul_ms"] - gflop / r["fma_peak_gflops"] * 1e3) <= 1e-9 * r["peak_matmul_ms"], r
        assert abs(r["peak_bound_vs_pytorch"] - torch[r["model"]][0] / r["peak_matmul_ms"]) <= 1e-9 * r["peak_bound_vs_pytorch"], r
    else:
        assert "peak_matmul_ms" not in r and "peak_bound_vs_pytorch" not in r, r
    assert r["routes"], r
    for site, routes in r["routes"].items():
        assert "reference" not in routes, (r["model"], r["policy"], site, routes)
    json.dump(r["config"], open("%s_%s.json" % (r["model"], r["policy"]), "w"))
PY

# PyTorch figures from another thread count than --threads: refused, naming the file and both counts.
sed 's/"threads": 1/"threads": 2/' torch.json > torch2.json
set +e; "$drift" bench train --threads 1 --steps 1 --models mlp --no-e2e --data "$src/data/austen/persuasion.txt" \
  --pytorch torch2.json > out.txt 2> err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] || fail "bench train --pytorch with 2-thread rows at --threads 1: exit 0"
grep -q "torch2.json" err.txt && grep -q "2 thread(s)" err.txt && grep -q "on 1 (--threads" err.txt \
  || fail "bench train --pytorch thread mismatch message: $(cat err.txt)"
[ ! -s out.txt ] || fail "bench train --pytorch thread mismatch printed rows: $(cat out.txt)"

# The table: its header once (the end-to-end child must not repeat this process's buffered output).
OMP_NUM_THREADS=1 "$drift" bench train --steps 1 --models proxy --policies fp32 --e2e-steps 2 > table.txt
[ "$(grep -c '^model ' table.txt)" -eq 1 ] || fail "bench train table header not once: $(cat table.txt)"
[ "$(grep -c '^proxy ' table.txt)" -eq 1 ] || fail "bench train table: no proxy row: $(cat table.txt)"
[ "$(grep -cE '^this core: fp32 multiply-add peak [0-9]+\.[0-9] GFLOP/s a thread \([A-Z0-9_]+, [0-9]+ lanes' table.txt)" -eq 1 ] \
  || fail "bench train: no line of this core's multiply-add peak: $(cat table.txt)"
# --shapes: the row's sites under it, indented, one line each (the proxy's 4 blocks x 2 layers and its
# head, 3 sites each, and its input layer's forward and grad_weight: nothing below it takes a gradient).
OMP_NUM_THREADS=1 "$drift" bench train --steps 1 --models proxy --policies fp32 --no-e2e --shapes > shapes.txt
[ "$(grep -c '^    site ' shapes.txt)" -eq 1 ] || fail "bench train --shapes: no site header: $(cat shapes.txt)"
[ "$(grep -cE '^    (block[0-3]\.mlp\.(fc|proj)|input|head)\.(forward|grad_input|grad_weight) ' shapes.txt)" -eq 29 ] \
  || fail "bench train --shapes: not 29 site lines: $(cat shapes.txt)"

# The same configs through `drift train`: each site takes the route the benchmark reported.
for model in mlp proxy; do
  for policy in fp32 mxfp8_e4m3; do
    "$drift" train --config "${model}_${policy}.json" --set train.steps=12 --out "run_${model}_${policy}" --quiet \
      || fail "drift train ${model}_${policy}"
    python3 - rows.json "run_${model}_${policy}/summary.json" "$model" "$policy" <<'PY' || fail "routes differ: $model $policy"
import json, sys
rows, summary, model, policy = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
bench = next(r for r in rows if r["model"] == model and r["policy"] == policy)["routes"]
train = summary["routes"]
assert set(bench) == set(train), (sorted(bench), sorted(train))
for site in bench:
    assert set(bench[site]) == set(train[site]), (site, bench[site], train[site])
    assert train[site][next(iter(train[site]))] == 12, (site, train[site])  # one call per training step
PY
  done
done

# Bad input: exit 2, naming the option.
expect_error() {  # <pattern> <args...>
  local pat="$1"; shift
  set +e; "$drift" bench train "$@" > out.txt 2> err.txt; rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "expected exit 2 for $*, got $rc"
  grep -q -- "$pat" err.txt || fail "expected '$pat' in: $(cat err.txt)"
  [ ! -s out.txt ] || fail "output despite the error ($*): $(cat out.txt)"
}
expect_error "--data: nosuch.txt: no such file" --data nosuch.txt
expect_error "--pytorch: cannot read" --pytorch nosuch.json
echo '{"mlp": 1}' > notrows.json
expect_error "--pytorch: .*expected a JSON list" --pytorch notrows.json
expect_error "--models: rnn not in" --models rnn
expect_error "--threads: expected an integer >= 1" --threads 0
echo "bench_train: OK"
