#!/usr/bin/env python3
"""Bit agreement of two result arrays (.npy, float32 or float64, same shape), e.g. the GPU's real
FP8 GEMM (drift matmul --backend cuda-native) against the simulator's tensor-core model
(drift matmul --backend cpu with "inner": {"fused": "h100_fp8_e4m3"}). Standard library only.

Usage: bit_agreement.py A.npy B.npy [--label TEXT]
Prints one line: label, elements, bit-identical count and fraction, largest difference in units in
the last place of fp32 (ulps), largest relative difference. Exit 0 (a report, not a test).
"""
import ast
import math
import struct
import sys


def read_npy(path):
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            sys.exit(f"{path}: not a .npy file")
        major = f.read(2)[0]
        hlen = struct.unpack("<H" if major == 1 else "<I", f.read(2 if major == 1 else 4))[0]
        header = ast.literal_eval(f.read(hlen).decode("latin1"))
        code = {"<f8": "d", "<f4": "f"}.get(header["descr"])
        if code is None or header["fortran_order"]:
            sys.exit(f"{path}: expected C-order <f4 or <f8, got {header}")
        n = 1
        for d in header["shape"]:
            n *= d
        data = struct.unpack(f"<{n}{code}", f.read(n * struct.calcsize(code)))
        return header["shape"], [float(x) for x in data]


def f32_bits(x):
    b = struct.unpack("<i", struct.pack("<f", x))[0]
    return b if b >= 0 else -(b & 0x7FFFFFFF)  # monotone integer order, so differences count ulps


def main():
    args = sys.argv[1:]
    label = "agreement"
    if "--label" in args:
        i = args.index("--label")
        label = args[i + 1]
        del args[i : i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    sa, a = read_npy(args[0])
    sb, b = read_npy(args[1])
    if sa != sb:
        sys.exit(f"shapes differ: {sa} vs {sb}")
    same = sum(1 for x, y in zip(a, b) if struct.pack("<d", x) == struct.pack("<d", y))
    ulps = max((abs(f32_bits(x) - f32_bits(y)) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y)), default=0)
    rel = max((abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y)), default=0)
    n = len(a)
    print(f"{label}: {n} elements, {same} bit-identical ({same / max(n, 1):.4f}), max {ulps} fp32 ulps, max rel {rel:.3g}")


if __name__ == "__main__":
    main()
