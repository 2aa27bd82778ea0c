#!/usr/bin/env bash
# The malformed-input regression suite: generated cases of bad configs, --set values, .npy files,
# checkpoints, run directories, `drift arith` input and sweep/compare/bisect/explain arguments.
# Each case must exit 2 within seconds, with a message that names the input (a pattern per case)
# and no library text ("json.exception", "basic_filebuf", "filesystem error", "stoull", ...), and
# must leave the scratch directory byte for byte as it was (nothing half-written).
# Usage: malformed_inputs.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

# fingerprint: every file's name, kind and checksum under the scratch directory (FIFOs by name).
fingerprint() { find . \( -type f -exec md5sum {} + \) -o \( ! -type f -print \) | sort; }
cases=0
errf=$(mktemp)  # the message of the case, kept outside the directory being compared
trap 'rm -rf "$work" "$errf"' EXIT
library_text='json\.exception|basic_filebuf|filesystem error|stoull|stoi|std::|bad_alloc|terminate called|what\(\)'

# bad NAME PATTERN command...: exit 2, PATTERN (fixed string) on stderr, no library text, nothing changed.
bad() {
  local name=$1 pattern=$2 rc=0 before after
  shift 2
  before=$(fingerprint)
  timeout 60 "$@" < "${stdin_file:-/dev/null}" > /dev/null 2> "$errf" || rc=$?
  after=$(fingerprint)
  local err
  err=$(cat "$errf")
  [ "$rc" = 2 ] || fail "[$name] expected exit 2, got $rc: $err"
  grep -qF -- "$pattern" "$errf" || fail "[$name] expected '$pattern' in the message, got: $err"
  if grep -qE -- "$library_text" "$errf"; then fail "[$name] library text in the message: $err"; fi
  [ "$before" = "$after" ] || fail "[$name] the directory changed: $(diff <(echo "$before") <(echo "$after") | head -5)"
  cases=$((cases + 1))
}

cat > tiny.json <<JSON
{ "model": {"kind": "mlp", "context": 4, "embed": 4, "hidden": 8},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 6, "batch": 2, "eval_every": 3, "eval_batches": 1, "log_every": 1, "checkpoint_every": 3} }
JSON
"$drift" train --config tiny.json --out done --quiet || fail "the reference run failed"

# --- configs --------------------------------------------------------------------------------------
mkcfg() { python3 -c "import json,sys; c=json.load(open('tiny.json')); exec(sys.argv[2]); open(sys.argv[1],'w').write(json.dumps(c))" "$@"; }
printf '{"model": {"kind": "mlp"}, "train": {"steps": 3, "steps": 4}}' > dup.json
bad config-duplicate-key "train.steps" "$drift" train --config dup.json --out o --quiet
printf '{"train": {"lr": 1e400}}' > overflow.json
bad config-number-overflow "train.lr" "$drift" train --config overflow.json --out o --quiet
printf '{"train": {"lr": 0.1,}}' > syntax.json
bad config-syntax "syntax.json" "$drift" train --config syntax.json --out o --quiet
printf '[1, 2]' > array.json
bad config-not-object "array.json" "$drift" train --config array.json --out o --quiet
printf '' > empty.json
bad config-empty "empty.json" "$drift" train --config empty.json --out o --quiet
printf '\xff\xfe{}' > binary.json
bad config-binary "binary.json" "$drift" train --config binary.json --out o --quiet
for spec in "output=3:output" "output=\"x\":output" "train=[]:train" "model.kind=7:model.kind" \
            "train.steps=-1:train.steps" "train.steps=1.5:train.steps" "train.lr=\"fast\":train.lr" \
            "train.batch=0:train.batch" "model.context=1e9:model.context" "precision.matmul=5:precision.matmul" \
            "divergence.on=\"spike\":divergence.on" "seed=-3:seed" "version=\"9.9.9\":version" "bogus=1:bogus"; do
  key=${spec%%:*}; pattern=${spec##*:}
  mkcfg c.json "k='${key%%=*}'.split('.'); d=c
for p in k[:-1]: d=d.setdefault(p, {})
d[k[-1]]=json.loads('''${key#*=}''')"
  bad "config-$key" "$pattern" "$drift" train --config c.json --out o --quiet
  rm c.json
done
bad config-missing "nope.json" "$drift" train --config nope.json --out o --quiet
bad config-directory "is a directory" "$drift" train --config done --out o --quiet
mkfifo fifo.json
bad config-fifo "fifo.json" "$drift" train --config fifo.json --out o --quiet
bad config-dev-zero "/dev/zero" "$drift" train --config /dev/zero --out o --quiet

# --- --set values ---------------------------------------------------------------------------------
bad set-index-past-2-64 "precision.matmul" "$drift" train --config tiny.json --out o --quiet \
  --set 'precision.matmul=[{"preset":"fp32"}]' --set precision.matmul.18446744073709551616.preset=x
bad set-index-out-of-list "not an index" "$drift" train --config tiny.json --out o --quiet \
  --set 'precision.matmul=[{"preset":"fp32"}]' --set precision.matmul.1.preset=x
bad set-overflow "train.lr" "$drift" train --config tiny.json --out o --quiet --set train.lr=1e400
bad set-duplicate-key "a" "$drift" train --config tiny.json --out o --quiet --set 'precision={"a":1,"a":2}'
bad set-no-equals "--set" "$drift" train --config tiny.json --out o --quiet --set train.lr
bad set-empty-segment "train..lr" "$drift" train --config tiny.json --out o --quiet --set train..lr=1
bad set-inside-number "train.steps" "$drift" train --config tiny.json --out o --quiet --set train.steps.x=1
bad set-output-number-then-out "output" "$drift" train --config tiny.json --out o --quiet --set output=3
bad set-invalid-utf8 "not UTF-8" "$drift" train --config tiny.json --out o --quiet --set $'output.name=\xfd'
bad out-invalid-utf8 "not UTF-8" "$drift" train --config tiny.json --out $'o\xfd' --quiet
bad set-seed-negative "--seed" "$drift" train --config tiny.json --out o --quiet --seed -1

# --- .npy files (drift quantize --in, drift matmul --a) ------------------------------------------
npy() { python3 -c "import sys; open(sys.argv[1],'wb').write(eval(sys.argv[2]))" "$@"; }
hdr() { echo "b'\\x93NUMPY\\x01\\x00' + (lambda h: bytes([len(h) % 256, len(h) // 256]) + h)(b\"$1\" + b' ' * (118 - len(b\"$1\")) + b'\\n')"; }
npy bad-magic.npy "b'NUMPY' + b'\\0' * 100"
npy short.npy "b'\\x93NUMPY\\x01'"
npy version3.npy "b'\\x93NUMPY\\x03\\x00' + b'\\0' * 100"
npy header-long.npy "b'\\x93NUMPY\\x01\\x00\\xff\\xff' + b'{' * 10"
npy truncated.npy "$(hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 4), }") + b'\\0' * 8"
npy trailing.npy "$(hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }") + b'\\0' * 16"
npy big-shape.npy "$(hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }")"
npy shape-overflow.npy "$(hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999, 1), }")"
npy int-dtype.npy "$(hdr "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }") + b'\\0' * 4"
npy big-endian.npy "$(hdr "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + b'\\0' * 4"
npy fortran.npy "$(hdr "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") + b'\\0' * 4"
npy three-d.npy "$(hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1), }") + b'\\0' * 4"
npy no-shape.npy "$(hdr "{'descr': '<f4', 'fortran_order': False, }") + b'\\0' * 4"
npy bad-key.npy "$(hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1, }") + b'\\0' * 4"
npy unterminated.npy "$(hdr "{'descr': '<f4") + b'\\0' * 4"
printf '1 2\n3\n' > ragged.txt
printf '1 x\n' > nan-text.txt
for f in bad-magic short version3 header-long truncated trailing big-shape shape-overflow int-dtype big-endian fortran \
         three-d no-shape bad-key unterminated; do
  bad "npy-$f" "$f.npy" "$drift" quantize --in "$f.npy" --out q.npy --quantizer fp8_e4m3
done
bad npy-matmul-truncated "truncated.npy" "$drift" matmul --a truncated.npy --b truncated.npy --out c.npy --policy fp32
bad text-ragged "ragged.txt" "$drift" quantize --in ragged.txt --out q.txt --quantizer fp8_e4m3
bad text-not-number "nan-text.txt" "$drift" quantize --in nan-text.txt --out q.txt --quantizer fp8_e4m3
bad npy-directory "is a directory" "$drift" quantize --in done --out q.npy --quantizer fp8_e4m3
mkfifo fifo.npy
bad npy-fifo "FIFO" "$drift" quantize --in fifo.npy --out q.npy --quantizer fp8_e4m3
bad npy-dev-zero "/dev/zero" "$drift" quantize --in /dev/zero --out q.npy --quantizer fp8_e4m3
npy one.npy "$(hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }") + b'\\0' * 8"
bad npy-out-is-directory "done" "$drift" quantize --in one.npy --out done --quantizer fp8_e4m3
bad npy-out-under-file "one.npy" "$drift" quantize --in one.npy --out one.npy/q.npy --quantizer fp8_e4m3
npy col.npy "$(hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (1048576, 1), }") + b'\\0' * 8388608"
bad matmul-product-too-large "memory" "$drift" matmul --a col.npy --b col.npy --transpose-b --out c.npy --policy fp32
rm col.npy

# --- checkpoints (--resume-from) ------------------------------------------------------------------
printf 'DRIFTCKP' > magic-only.bin
head -c 100 done/checkpoint.bin > cut.bin
python3 -c "b=bytearray(open('done/checkpoint.bin','rb').read()); b[200]^=1; open('flip.bin','wb').write(b)"
printf 'not a checkpoint at all' > text.bin
for f in magic-only cut flip text; do
  bad "checkpoint-$f" "$f.bin" "$drift" train --config tiny.json --out o --quiet --resume-from "$f.bin"
done
bad checkpoint-directory "is a directory" "$drift" train --config tiny.json --out o --quiet --resume-from done
bad checkpoint-missing "nope.bin" "$drift" train --config tiny.json --out o --quiet --resume-from nope.bin
mkfifo fifo.bin
bad checkpoint-fifo "FIFO" "$drift" train --config tiny.json --out o --quiet --resume-from fifo.bin
bad checkpoint-dev-zero "/dev/zero" "$drift" train --config tiny.json --out o --quiet --resume-from /dev/zero
bad checkpoint-other-model "tensor" "$drift" train --config tiny.json --out o --quiet --set model.hidden=9 \
  --resume-from done/checkpoint.bin

# --- run directories ------------------------------------------------------------------------------
printf 'x' > plainfile
bad out-is-file "plainfile" "$drift" train --config tiny.json --out plainfile --quiet
bad out-under-file "plainfile" "$drift" train --config tiny.json --out plainfile/run --quiet
bad out-in-proc "/proc" "$drift" train --config tiny.json --out /proc/drift-run --quiet
if [ "$(id -u)" != 0 ]; then
  mkdir ro && chmod 555 ro
  bad out-read-only "ro" "$drift" train --config tiny.json --out ro/run --quiet
fi
bad out-finished-run "finished run" "$drift" train --config tiny.json --out done --quiet
bad reference-not-a-run "plainfile" "$drift" train --config tiny.json --out o --quiet --reference plainfile
# --resume over a metrics.jsonl that is not drift's: copies of the finished run with the last
# checkpoint kept and the metrics damaged.
resume_case() {
  local name=$1 pattern=$2 edit=$3
  rm -rf "r-$name" && cp -r done "r-$name" && rm "r-$name/summary.json"
  python3 -c "p='r-$name/metrics.jsonl'; L=open(p).read().splitlines(); $edit; open(p,'w').write(''.join(l+'\n' for l in L))"
  bad "resume-$name" "$pattern" "$drift" train --config tiny.json --out "r-$name" --quiet --resume
}
resume_case corrupt-last-line "metrics.jsonl" "L[-1]='{\"step\": 5, \"loss\": '"
resume_case last-line-not-object "metrics.jsonl" "L[-1]='[1, 2]'"
resume_case step-a-string "metrics.jsonl" "L[0]=L[0].replace('\"step\":0', '\"step\":\"0\"')"
resume_case step-negative "metrics.jsonl" "L[0]=L[0].replace('\"step\":0', '\"step\":-1')"
resume_case duplicate-key "metrics.jsonl" "L[0]=L[0].replace('{', '{\"step\":0,', 1)"

# --- drift arith input ----------------------------------------------------------------------------
printf '0x1 0x2\nzz 0x1\n' > arith-bad.txt
stdin_file=arith-bad.txt bad arith-bad-operand "line 2" "$drift" arith --op add --format fp8_e4m3
printf '0x1\n' > arith-short.txt
stdin_file=arith-short.txt bad arith-missing-operand "line 1" "$drift" arith --op add --format fp8_e4m3
stdin_file=/dev/zero bad arith-endless-input "stdin" "$drift" arith --op add --format fp8_e4m3

# --- sweep / compare / bisect / explain arguments --------------------------------------------------
bad sweep-jobs-negative "-j" "$drift" sweep --config tiny.json --seeds 1 --out s -j -1
bad sweep-jobs-zero "-j" "$drift" sweep --config tiny.json --seeds 1 --out s -j 0
bad sweep-seeds-bad "--seeds" "$drift" sweep --config tiny.json --seeds 1-x --out s
bad sweep-out-is-file "plainfile" "$drift" sweep --config tiny.json --seeds 1 --out plainfile
bad sweep-set-overflow "1e400" "$drift" sweep --config tiny.json --seeds 1 --out s --set train.lr=1e400
bad bisect-jobs-negative "-j" "$drift" bisect --config tiny.json --seed 1 --out b -j -1
bad bisect-out-under-file "plainfile" "$drift" bisect --config tiny.json --seed 1 --out plainfile/b
bad explain-step-negative "--step" "$drift" explain --config tiny.json --step -1
bad explain-step-past-2-64 "--step" "$drift" explain --config tiny.json --step 18446744073709551616
summary_case() {
  local name=$1 pattern=$2 edit=$3
  rm -rf "c-$name" && cp -r done "c-$name"
  python3 -c "import json; p='c-$name/summary.json'; s=json.load(open(p)); $edit; open(p,'w').write(json.dumps(s))"
  bad "compare-$name" "$pattern" "$drift" compare "c-$name"
}
summary_case diverged-a-string "\"diverged\"" "s['diverged']='no'"
summary_case steps-negative "\"steps\"" "s['steps']=-4"
summary_case missing-keys "missing" "s={'version': s['version']}"
summary_case loss-a-string "\"final_val_loss\"" "s['final_val_loss']='low'"
summary_case not-an-object "summary.json" "s=[s]"
printf '{"diverged": false, "diverged": true}' > c-missing-keys/summary.json
bad compare-duplicate-key "diverged" "$drift" compare c-missing-keys
bad compare-no-such-dir "nope" "$drift" compare nope

echo "malformed inputs: $cases cases, each exit 2 naming the input, nothing changed"
