#!/usr/bin/env python3
"""GPU-side check of `tally reduce` against numpy: .npy files of every dtype, a raw file, and a
file too large for the device. Usage: cli-check.py TALLY_BINARY WORKDIR. Exit status 0 = all ok."""
import math, os, subprocess, sys
import numpy as np

tally, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(20261122)
bad = 0

def run(*args):
    p = subprocess.run([tally, "reduce", "--value-only", *args], capture_output=True, text=True)
    return p.returncode, p.stdout.strip(), p.stderr.strip()

def check(name, got, want, ok):
    global bad
    status = "ok" if ok else "MISMATCH"
    bad += not ok
    print(f"{status:8} {name}: tally {got} numpy {want}")

for dt in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]:
    n = int(rng.integers(1, 3_000_000))
    if dt.startswith("float"):
        x = rng.uniform(-1, 1, n).astype(dt)
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    path = os.path.join(work, f"{dt}.npy")
    np.save(path, x[1:])  # an odd length, not a multiple of the vector width
    x = x[1:]
    for op in ["sum", "min", "max"] + ([] if dt.startswith("float") else ["bit_xor"]):
        rc, out, err = run("--op", op, path)
        if rc != 0:
            check(f"{op} {dt}", err, "", False)
            continue
        if op == "sum" and dt.startswith("float"):
            exact = math.fsum(float(v) for v in x)
            tol = 1e-5 * float(np.abs(x).sum(dtype=np.float64)) if dt == "float32" else 1e-12 * float(np.abs(x).sum())
            check(f"sum {dt} n={len(x)}", out, exact, abs(float(out) - exact) <= tol)
        elif op == "sum":
            acc = np.uint64 if dt.startswith("u") else np.int64
            want = int(x.astype(acc).sum(dtype=acc))  # numpy wraps modulo 2^64, like tally
            check(f"sum {dt} n={len(x)}", out, want, int(out) == want)
        elif op == "bit_xor":
            want = int(np.bitwise_xor.reduce(x))
            check(f"bit_xor {dt}", out, want, int(out) == want)
        else:
            want = getattr(x, op)()
            # Floats print as the shortest text that reads back to the same value of their type.
            same = np.dtype(dt).type(out) == want if dt.startswith("float") else int(out) == int(want)
            check(f"{op} {dt}", out, want, bool(same))

raw = rng.integers(-1000, 1000, 100003, dtype=np.int32)
raw.tofile(os.path.join(work, "raw.bin"))
rc, out, err = run("--dtype", "i32", os.path.join(work, "raw.bin"))
check("raw i32 sum", out or err, int(raw.sum(dtype=np.int64)), rc == 0 and int(out) == int(raw.sum(dtype=np.int64)))
b = rng.random(1000) > 0.001
np.save(os.path.join(work, "bool.npy"), b)
rc, out, err = run("--op", "all", os.path.join(work, "bool.npy"))
check("all bool", out or err, bool(b.all()), rc == 0 and out == ("true" if b.all() else "false"))
empty = np.zeros(0, dtype=np.float32)
np.save(os.path.join(work, "empty.npy"), empty)
rc, out, err = run("--op", "max", os.path.join(work, "empty.npy"))
check("max of empty f32 (identity)", out or err, "-inf", rc == 0 and out == "-inf")
print(f"{bad} mismatches")
sys.exit(1 if bad else 0)
