#!/usr/bin/env bash
# drift matmul / drift quantize end to end, checked against exact Python (fractions, no numpy).
# Usage: cli_matmul.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

# npy helper: write <file> <dtype f4|f8> <rows> <cols|-> <values...>; read <file> prints shape and values (repr).
cat > npy.py <<'EOF'
import struct, sys
from fractions import Fraction

def write(path, dtype, shape, values, version=1, fortran=False):
    shp = "(%d,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(str(d) for d in shape)
    d = "{'descr': '<%s', 'fortran_order': %s, 'shape': %s, }" % (dtype, "True" if fortran else "False", shp)
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(d) + 1) % 64) % 64
    h = (d + " " * pad + "\n").encode()
    out = b"\x93NUMPY" + bytes([version, 0]) + (struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))) + h
    fmt = {"f4": "<f", "f8": "<d", "i4": "<i"}[dtype]
    out += b"".join(struct.pack(fmt, v) for v in values)
    open(path, "wb").write(out)

def read(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY", "bad magic"
    if b[6] == 1:
        n = struct.unpack("<H", b[8:10])[0]; start = 10
    else:
        n = struct.unpack("<I", b[8:12])[0]; start = 12
    hdr = b[start:start + n].decode()
    d = eval(hdr)
    assert not d["fortran_order"]
    shape = d["shape"]
    size = 1
    for s in shape: size *= s
    fmt = {"<f4": "<f", "<f8": "<d"}[d["descr"]]
    w = struct.calcsize(fmt)
    data = b[start + n:]
    assert len(data) == size * w, "size mismatch"
    return d["descr"], shape, [struct.unpack(fmt, data[i*w:(i+1)*w])[0] for i in range(size)]
EOF

# ---- 1. fp32 matmul of small integer matrices: every product and partial sum is an exact integer
# below 2^24, so fp32 sequential accumulation must give the exact result (checked in Fractions).
python3 - <<'EOF'
import sys; sys.path.insert(0, ".")
from npy import write
A = [[(3 * i + 5 * k) % 17 - 8 for k in range(37)] for i in range(5)]   # 5 x 37
B = [[(7 * k - 2 * j) % 13 - 6 for j in range(4)] for k in range(37)]  # 37 x 4
write("a.npy", "f8", (5, 37), [v for r in A for v in r])
write("b.npy", "f4", (37, 4), [v for r in B for v in r])
# B stored transposed (4 x 37), for --transpose-b; A as a v2 header.
write("bt.npy", "f8", (4, 37), [B[k][j] for j in range(4) for k in range(37)], version=2)
EOF
"$drift" matmul --a a.npy --b b.npy --policy fp32 --out c.npy > tel.json || fail "matmul fp32 exited $?"
"$drift" matmul --a a.npy --b bt.npy --transpose-b --policy fp32 --out ct.npy --reference --out-dtype f4 > tel_ref.json ||
  fail "matmul fp32 --transpose-b --reference exited $?"
python3 - <<'EOF'
import sys, json; sys.path.insert(0, ".")
from fractions import Fraction
from npy import read
A = [[(3 * i + 5 * k) % 17 - 8 for k in range(37)] for i in range(5)]
B = [[(7 * k - 2 * j) % 13 - 6 for j in range(4)] for k in range(37)]
C = [[sum(Fraction(A[i][k]) * Fraction(B[k][j]) for k in range(37)) for j in range(4)] for i in range(5)]
want = [float(c) for r in C for c in r]
for name, dtype in (("c.npy", "<f8"), ("ct.npy", "<f4")):
    d, shape, got = read(name)
    assert d == dtype, (name, d)
    assert tuple(shape) == (5, 4), (name, shape)
    assert [Fraction(g) for g in got] == [Fraction(w) for w in want], (name, got, want)
t = json.load(open("tel.json"))
assert t["m"] == 5 and t["k"] == 37 and t["n"] == 4, t
assert t["a"]["elements"] == 185 and t["b"]["elements"] == 148, t
assert t["a"]["amax"] == 8 and t["a"]["clipped"] == 0, t["a"]
assert t["inner"]["adds"] == 5 * 4 * 37 or t["path"] == "fast", t["inner"]
assert t["policy"]["inner"]["format"] == "fp32", t["policy"]
r = json.load(open("tel_ref.json"))
assert r["path"] == "reference", r["path"]
assert r["inner"]["adds"] == 5 * 4 * 37, r["inner"]
print("fp32 matmul: exact, path", t["path"])
EOF

# ---- 2. quantize: a block of 32 values at 0.99 under mxfp8_e4m3 (OCP floor rule).
# amax 0.99 -> floor(log2 0.99) = -1, minus emax(E4M3) = 8 -> scale 2^-9; 0.99 * 2^9 = 506.88 > 448
# saturates to 448 -> 448 * 2^-9 = 0.875 for every element.
python3 -c '
import sys; sys.path.insert(0, ".")
from npy import write
write("x.npy", "f8", (2, 32), [0.99] * 64)
write("xt.npy", "f4", (32, 2), [0.99] * 64)
'
"$drift" quantize --in x.npy --out q.npy --quantizer mxfp8_e4m3 > qstats.json || fail "quantize exited $?"
"$drift" quantize --in xt.npy --out qt.npy --axis 0 \
  --quantizer '{"format": "fp8_e4m3", "scaling": {"kind": "block", "block": 32, "rule": "floor"}}' > qstats_t.json ||
  fail "quantize --axis 0 exited $?"
python3 - <<'EOF'
import sys, json; sys.path.insert(0, ".")
from npy import read
for name, shape in (("q.npy", (2, 32)), ("qt.npy", (32, 2))):
    d, s, v = read(name)
    assert tuple(s) == shape, (name, s)
    assert v == [0.875] * 64, (name, v[:4])
for name in ("qstats.json", "qstats_t.json"):
    st = json.load(open(name))
    assert st["clipped"] == 64 and st["clipped_frac"] == 1.0, st
    assert st["scale"]["count"] == 2 and st["scale"]["exp_min"] == -9 and st["scale"]["exp_max"] == -9, st["scale"]
    assert st["rows"] == 2 and st["k"] == 32, st
print("quantize mxfp8_e4m3: 0.99 -> 0.875")
EOF

# ---- 3. bad input: exit 2, a message on stderr, and no output file.
expect_bad() {  # expect_bad <description> <expected stderr substring> <output file> -- <drift args...>
  local what="$1" msg="$2" out="$3"
  shift 4
  rm -f "$out"
  set +e
  "$drift" "$@" > /dev/null 2> err.txt
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, expected 2 ($(cat err.txt))"
  grep -qF -- "$msg" err.txt || fail "$what: stderr lacks '$msg': $(cat err.txt)"
  [ ! -e "$out" ] || fail "$what: left $out behind"
  ls -a | grep -q '\.tmp\.' && fail "$what: left a temporary file"
  return 0
}
python3 -c '
import sys; sys.path.insert(0, ".")
from npy import write
write("int.npy", "i4", (2, 2), [1, 2, 3, 4])
write("fortran.npy", "f8", (2, 2), [1, 2, 3, 4], fortran=True)
write("b3.npy", "f8", (3, 4), [1] * 12)
'
head -c 100 a.npy > trunc.npy
expect_bad "unknown format" "policy.a.format: unknown format 'e9m9'" out.npy -- \
  matmul --a a.npy --b b.npy --policy '{"a": {"format": "e9m9"}}' --out out.npy
expect_bad "unknown key" "policy.inner.ordr: unknown key" out.npy -- \
  matmul --a a.npy --b b.npy --policy '{"preset": "fp32", "inner": {"ordr": "reverse"}}' --out out.npy
expect_bad "unknown preset" "unknown matmul preset 'mxfp7'" out.npy -- \
  matmul --a a.npy --b b.npy --policy mxfp7 --out out.npy
expect_bad "invalid JSON" "policy: not valid JSON" out.npy -- \
  matmul --a a.npy --b b.npy --policy '{"a": ' --out out.npy
expect_bad "int dtype" "int.npy: dtype '<i4' is not supported" out.npy -- \
  matmul --a int.npy --b b.npy --policy fp32 --out out.npy
expect_bad "fortran order" "fortran.npy: fortran_order True is not supported" out.npy -- \
  matmul --a fortran.npy --b b.npy --policy fp32 --out out.npy
expect_bad "truncated" "trunc.npy: truncated" out.npy -- \
  matmul --a trunc.npy --b b.npy --policy fp32 --out out.npy
expect_bad "shape mismatch" "inner dimensions differ" out.npy -- \
  matmul --a a.npy --b b3.npy --policy fp32 --out out.npy
expect_bad "missing input" "missing.npy: cannot open" out.npy -- \
  matmul --a missing.npy --b b.npy --policy fp32 --out out.npy
expect_bad "bad quantizer" "quantizer.scaling.rule: unknown exponent rule 'round'" q2.npy -- \
  quantize --in x.npy --out q2.npy --quantizer '{"preset": "mxfp8_e4m3", "scaling": {"rule": "round"}}'
expect_bad "bad axis" "--axis" q2.npy -- quantize --in x.npy --out q2.npy --quantizer fp8_e4m3 --axis 2
# A failed run leaves an existing output untouched.
cp c.npy keep.npy
expect_bad "existing output" "unknown format" /nonexistent -- \
  matmul --a a.npy --b b.npy --policy '{"b": {"format": "nope"}}' --out keep.npy
cmp -s c.npy keep.npy || fail "a failed run changed an existing output"
# ---- --exact-error: C's error against the exact product, checked in Fractions. A's rows hold large
# terms that cancel, under fp32 and MXFP8; a K of 20 under MXFP8 (block 32) is warned about.
python3 - <<'EOF'
import sys, random; sys.path.insert(0, ".")
from npy import write
rnd = random.Random(7)
A = [[rnd.choice([1e8, -1e8, 1.0]) * rnd.uniform(0.5, 2) for k in range(20)] for i in range(4)]
B = [[rnd.uniform(-1, 1) for j in range(3)] for k in range(20)]
A[0] = [1e16, 1.0, -1e16] + [0.0] * 17     # with B[2] = B[0]: exactly B[1][j] (an fp64 sum in order gives 0)
B[2] = list(B[0])
write("ea.npy", "f8", (4, 20), [v for r in A for v in r])
write("eb.npy", "f8", (20, 3), [v for r in B for v in r])
EOF
"$drift" matmul --a ea.npy --b eb.npy --policy fp32 --out ec.npy --exact-error > ee.json || fail "matmul --exact-error exited $?"
"$drift" matmul --a ea.npy --b eb.npy --policy mxfp8_e4m3 --out ec8.npy --exact-error > ee8.json 2> ee8.err ||
  fail "matmul mxfp8 --exact-error exited $?"
grep -q "warning: operand a's scale block (32 elements along K) is longer than K = 20" ee8.err || fail "no block > K warning: $(cat ee8.err)"
python3 - <<'EOF' || fail "--exact-error differs from the Fractions reference"
import sys, json; sys.path.insert(0, ".")
from fractions import Fraction
from npy import read
_, _, a = read("ea.npy"); _, _, b = read("eb.npy")
def floor_log2(x):  # x > 0, a Fraction
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > x else e
for cfile, tfile in (("ec.npy", "ee.json"), ("ec8.npy", "ee8.json")):
    _, _, c = read(cfile)
    got = json.load(open(tfile))["exact_error"]
    rels, ulps = [], []
    for i in range(4):
        for j in range(3):
            e = sum(Fraction(a[i * 20 + k]) * Fraction(b[k * 3 + j]) for k in range(20))
            err = abs(Fraction(c[i * 3 + j]) - e)
            if e != 0: rels.append(err / abs(e))
            ex = max(floor_log2(abs(e)), -126) if e != 0 else -126   # the fp32 output format's ulp
            ulps.append(err / Fraction(2) ** (ex - 23))
    # drift rounds the exact value to fp64 once (relative error <= 2^-53), which moves a relative
    # error by at most about 2^-53 and an error in fp32 ulps by at most 2^-53 * 2^24 = 2^-29.
    for key, want, slack in (("max_rel_error", max(rels), 2**-50), ("mean_rel_error", sum(rels) / len(rels), 2**-50),
                             ("max_ulps", max(ulps), 2**-27), ("mean_ulps", sum(ulps) / len(ulps), 2**-27)):
        assert abs(got[key] - float(want)) <= slack + 1e-12 * float(want), (tfile, key, got[key], float(want))
    assert got["ulp_format"] == "fp32" and got["exact_zeros"] == 0 and got["nonfinite"] == 0, got
EOF

echo "cli_matmul: all checks passed"
