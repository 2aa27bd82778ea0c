#!/usr/bin/env bash
# The house only calls downward: every #include "<layer>/..." in src/ names the file's own layer or
# one below it, every folder of src/ is a layer named in the order below, and no file reaches itself
# through its includes (no include cycle). The order is written here once (README's layout section and
# DESIGN.md draw the same picture). io sits above arith: it reads files into arith's types (the
# tensor-core vectors of io/tc_vectors.h) and does no arithmetic; arith does no I/O.
# The checker first proves it can fail: on a small made-up tree with one upward include, one cycle
# and one unlisted folder it must report exactly those.
# Usage: layer_order.sh <drift-binary> <source-dir>   (the binary is not used)
source "$(dirname "$0")/common.bash" "$@"

python3 - "$src/src" "$work" <<'PY'
import os, re, sys

ORDER = ["arith", "io", "backend", "model", "policy", "diag", "train", "study", "cli"]
RANK = {layer: i for i, layer in enumerate(ORDER)}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCE = (".h", ".cpp", ".cu", ".cuh")

def check(root):
    problems, edges = [], {}
    for layer in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, layer)) and layer not in RANK:
            problems.append(f"src/{layer}/: a folder that is not a layer of the order {ORDER}")
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(SOURCE):
                continue
            path = os.path.relpath(os.path.join(folder, name), root)
            layer = path.split("/")[0]
            edges[path] = []
            for target in INCLUDE.findall(open(os.path.join(root, path), errors="replace").read()):
                to = target.split("/")[0]
                if to not in RANK:
                    continue  # not ours (e.g. "hwy/highway.h")
                edges[path].append(target)
                if layer in RANK and RANK[to] > RANK[layer]:
                    problems.append(f"src/{path} includes {target}: {layer} sits below {to}")
    # Include cycles: a depth-first walk; a file met again while still on the walk closes a circle.
    state, stack = {}, []
    def walk(f):
        state[f] = "open"; stack.append(f)
        for g in edges.get(f, []):
            if state.get(g) == "open":
                problems.append("include cycle: " + " -> ".join(stack[stack.index(g):] + [g]))
            elif g not in state and g in edges:
                walk(g)
        stack.pop(); state[f] = "done"
    for f in sorted(edges):
        if f not in state:
            walk(f)
    return problems

# The checker fails where it should.
fake = os.path.join(sys.argv[2], "fake")
for path, text in {"arith/a.h": '#include "train/t.h"\n', "train/t.h": '#include "arith/b.h"\n',
                   "arith/b.h": '#include "arith/c.h"\n', "arith/c.h": '#include "arith/b.h"\n',
                   "cli/ok.cpp": '#include "train/t.h"\n#include "hwy/highway.h"\n', "extra/x.h": ""}.items():
    os.makedirs(os.path.dirname(os.path.join(fake, path)), exist_ok=True)
    open(os.path.join(fake, path), "w").write(text)
found = check(fake)
expected = ["src/extra/: a folder that is not a layer of the order " + str(ORDER),
            "src/arith/a.h includes train/t.h: arith sits below train",
            "include cycle: arith/b.h -> arith/c.h -> arith/b.h"]
if sorted(found) != sorted(expected):
    sys.exit(f"FAIL: the checker on a made-up tree found {found}, expected {expected}")

problems = check(sys.argv[1])
for p in problems:
    print("FAIL:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
