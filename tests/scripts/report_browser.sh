#!/usr/bin/env bash
# drift report in a real browser: a small sweep (3 policies x 2 seeds, one diverging, diagnostics and
# a probe on) and a bisect, their report rendered by headless Chromium (Debian's chromium, installed by scripts/setup.sh). Fails
# on any console message or page error, unless every chart drew (DOM: data-drawn on each), or when
# the screenshot is blank. First it shows that the harness catches a failing page. Keeps the page,
# the screenshot, the DOM and the SVG figures in <build>/test-artifacts/report/.
# Also checks drift export (CSV and JSONL) on one run, and provenance.json.
# Usage: report_browser.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
export OMP_NUM_THREADS=1
art="$(dirname "$drift")/test-artifacts/report"
rm -rf "$art" && mkdir -p "$art"
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || fail "chromium is not installed (scripts/setup.sh installs Debian's chromium)"

# Renders a page: the DOM after its scripts ran (stdout of --dump-dom) and the browser's log (console
# messages appear as "CONSOLE" lines). $1 page, $2 output prefix.
render() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions --mute-audio \
    --user-data-dir="$work/profile" --enable-logging=stderr --v=0 --virtual-time-budget=15000 \
    --dump-dom "file://$1" > "$2.dom.html" 2> "$2.log" || fail "chromium --dump-dom exited $?: $(tail -5 "$2.log")"
}
console_errors() { grep -E 'CONSOLE|Uncaught' "$1" || true; }

# --- the harness catches a page whose script fails ---
printf '<!DOCTYPE html><html><body><script>console.error("drift-canary"); null.x;</script></body></html>' > broken.html
render "$work/broken.html" broken
console_errors broken.log | grep -q 'drift-canary' || fail "the harness did not see a console error: $(cat broken.log)"

# --- a small sweep ---
cat > tiny.json <<JSON
{ "seed": 1,
  "model": {"kind": "mlp", "context": 8, "embed": 8, "hidden": 32},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 40, "batch": 8, "lr": 0.03, "warmup": 0, "eval_every": 10, "eval_batches": 2, "log_every": 5},
  "diagnostics": {"every": 10, "probes": ["bf16"]} }
JSON
echo '[{"preset": "fp32"}]' > fp32.json
echo '{"matmul": [{"preset": "mxfp8_e4m3"}], "elementwise": [{"quantizer": "bf16"}]}' > mxfp8.json
# A policy that diverges (forward outputs in a 4-bit format with infinities: the loss becomes
# non-finite once a logit passes 3, at this learning rate within 40 steps): the markers get drawn.
cat > boom.json <<'JSON'
{"matmul": [{"match": {"role": "forward"},
             "output": {"format": {"exp_bits": 2, "man_bits": 1, "inf": true, "nan": "ieee"}, "overflow": "ieee"}}]}
JSON
"$drift" sweep --config tiny.json --seeds 1-2 --policies fp32.json mxfp8.json boom.json -j 2 --out sw \
  > sweep.txt 2>&1 ||
  fail "sweep exited $?: $(cat sweep.txt)"

# --- provenance.json beside a config.json that is still a valid config ---
run=sw/mxfp8/seed1
python3 -c "import json,sys; assert json.load(open('sw/boom/seed1/summary.json'))['diverged']" ||
  fail "the boom policy did not diverge"

python3 - "$run" <<'PY' || fail "provenance.json"
import json, sys
p = json.load(open(sys.argv[1] + "/provenance.json"))["invocations"]
assert len(p) == 1, p
r = p[0]
assert r["command_line"][1] == "train" and "--config" in r["command_line"], r
for k in ("drift_version", "git_commit", "host", "start_time", "threads", "backend"):
    assert k in r, (k, r)
assert r["backend"] == "cpu" and r["threads"] == 1 and r["resumed"] is False, r
PY
"$drift" explain --config "$run/config.json" > /dev/null || fail "a run's config.json is not a valid config"

# --- drift export: one column per leaf, rates beside counts, diag fields joined on the step ---
"$drift" export "$run" --format csv --out "$art/export.csv" 2> /dev/null || fail "export csv"
"$drift" export "$run" --format jsonl > export.jsonl || fail "export jsonl"
python3 - "$art/export.csv" export.jsonl "$run" <<'PY' || fail "export tables"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lines = [json.loads(l) for l in open(sys.argv[2])]
metrics = [json.loads(l) for l in open(sys.argv[3] + "/metrics.jsonl")]
diag = [json.loads(l) for l in open(sys.argv[3] + "/diag.jsonl")]
steps = sorted({m["step"] for m in metrics} | {d["step"] for d in diag})
assert [int(r["step"]) for r in rows] == steps and [l["step"] for l in lines] == steps
by_step = {l["step"]: l for l in lines}
for m in metrics:
    l = by_step[m["step"]]
    assert l["loss"] == m["loss"], (l["loss"], m["loss"])
    for site, ops in m["sites"].items():
        for op in ("a", "b"):
            q = ops[op]
            assert l[f"sites.{site}.{op}.clipped"] == q["clipped"]
            want = q["clipped"] / q["elements"] if q["elements"] else None
            assert l[f"sites.{site}.{op}.clip_rate"] == want, (site, op)
    for cls, q in m["classes"].items():
        assert l[f"classes.{cls}.amax"] == q["amax"]
for d in diag:
    l = by_step[d["step"]]
    assert l["diag.grad.overall.cosine"] == d["grad"]["overall"]["cosine"]
    assert l["diag.probes.bf16.loss"] == d["probes"][0]["loss"]
# CSV and JSONL hold the same numbers (CSV as shortest round-trip text).
for r, l in zip(rows, lines):
    for k, v in l.items():
        if isinstance(v, float): assert float(r[k]) == v, (k, r[k], v)
        if v is None: assert r[k] == "", (k, r[k])
PY

# --- a bisect of the diverging policy: its verdict table goes into the report too ---
"$drift" bisect --config tiny.json --seed 1 --set "precision=$(cat boom.json)" --out bis -j 2 > bis.txt 2>&1 ||
  fail "bisect: $(cat bis.txt)"

# --- bad input: exit 2, a message naming what is wrong, nothing written ---
bad() {  # bad <expected message> <command...>
  local want="$1"; shift
  set +e; "$@" > bad.out 2> bad.err; local rc=$?; set -e
  [ "$rc" -eq 2 ] && grep -q -- "$want" bad.err || fail "expected exit 2 and '$want' from $*: $rc $(cat bad.err)"
}
bad "no such directory" "$drift" report nosuch --out r.html
bad "not a run directory (no metrics.jsonl)" "$drift" export sw
bad "apt-get install libjs-dygraphs" env DRIFT_DYGRAPHS_DIR="$work/none" "$drift" report sw --out r.html
[ -e r.html ] && fail "a failed report wrote its page"
bad "^drift: error: --out: " "$drift" report sw --out "$work/none/r.html"

# --- the report and its figures ---
"$drift" report sw bis --out "$art/report.html" --figures "$art/figures" > report.txt || fail "report exited $?"
grep -Eq '<(script|img|iframe)[^>]* src=|<link[^>]* href=|url\((https?:|//)' "$art/report.html" &&
  fail "the report references an external resource"
ls "$art"/figures/loss.svg "$art"/figures/clip_rate_gradient.svg "$art"/figures/diag_grad_cosine.svg > /dev/null ||
  fail "figures missing: $(ls "$art/figures")"
python3 -c "import sys, xml.dom.minidom as m; [m.parse(f) for f in sys.argv[1:]]" "$art"/figures/*.svg || fail "an SVG is not well-formed"

render "$art/report.html" "$art/report"
errors=$(console_errors "$art/report.log")
[ -z "$errors" ] || fail "console messages while rendering the report: $errors"
python3 - "$art/report.dom.html" <<'PY' || fail "the report's DOM"
import re, sys
dom = open(sys.argv[1]).read()
body = re.search(r"<body[^>]*>", dom).group(0)
def attr(name):
    m = re.search(name + r'="([^"]*)"', body)
    return m.group(1) if m else None
assert attr("data-ready") == "1", body
assert attr("data-errors") == "0", (body, re.search(r'id="drift-errors"[^>]*>([^<]*)', dom).group(1))
charts = re.findall(r'<div class="chart[^"]*"[^>]*>', dom)
drawn = [c for c in charts if 'data-drawn="1"' in c]
assert len(charts) >= 15 and len(drawn) == len(charts), (len(charts), len(drawn))
assert dom.count("<canvas") >= 2 * len(charts), dom.count("<canvas")   # dygraphs: a canvas and an overlay each
for section in ("loss", "signals", "sites", "classes", "elementwise", "diag", "compare", "bisect"):
    assert f'<section id="{section}"' in dom, section
# The divergence markers: dygraphs annotations on the diverged runs' loss curves.
assert dom.count('class="dygraph-annotation') >= 2, dom.count('class="dygraph-annotation')
assert "restore " in dom and "found" in dom, "the bisect verdict table"
print(f"report: {len(charts)} charts drawn in {attr('data-render-ms')} ms")
PY

timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile" \
  --hide-scrollbars --window-size=1400,2200 --virtual-time-budget=15000 --screenshot="$art/report.png" \
  "file://$art/report.html" > shot.log 2>&1 || fail "chromium --screenshot exited $?: $(tail -5 shot.log)"
python3 - "$art/report.png" <<'PY' || fail "the screenshot is blank"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    if kind == b"IDAT": idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
prev, colours, background, painted = bytearray(stride), set(), None, 0
for y in range(h):                      # undo the PNG row filters
    f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = row[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 2: row[i] = (row[i] + b) & 255
        elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = row
    for x in range(0, w, 4):
        px = bytes(row[x * bpp:x * bpp + 3])
        colours.add(px)
        if background is None: background = px
        painted += px != background
share = painted / (h * ((w + 3) // 4))
print(f"screenshot {w}x{h}: {len(colours)} colours, {share:.1%} not background")
assert len(colours) > 50 and share > 0.05, (len(colours), share)
PY
echo "report_browser: OK (artifacts in $art)"
