#!/usr/bin/env python3
"""GPU-side check of the tally command against numpy and exact references: `tally reduce` on .npy
files of every dtype and a raw file; argmin/argmax (ties, NaN policies), f16 and bf16 inputs, mean,
sum_sq, norm2, the accuracy modes (exact vs math.fsum, bitwise), `tally stats` and `tally dot`.
Usage: cli-check.py TALLY_BINARY WORKDIR. Exit status 0 = all ok."""
import json, math, os, subprocess, sys
from fractions import Fraction
import numpy as np

tally, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(20261122)
bad = 0

def command(*args):
    p = subprocess.run([tally, *args], capture_output=True, text=True)
    return p.returncode, p.stdout.strip(), p.stderr.strip()

def run(*args):
    return command("reduce", "--value-only", *args)

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

# ---- helpers for the numerics checks ----------------------------------------------------------

def save(name, x):
    path = os.path.join(work, name)
    np.save(path, x)
    return path

def raw(name, x):
    path = os.path.join(work, name)
    x.tofile(path)
    return path

def same_bits(got, want, dt=np.float64):
    """got (tally's text) and want hold the same value of type dt, bitwise; NaN matches NaN."""
    g, w = dt(float(got)), dt(want)
    if np.isnan(w):
        return bool(np.isnan(g))
    return g.tobytes() == w.tobytes()

def exact_sum(ratios, scale):
    """Exact sum of numbers given as (numerator, power-of-two denominator <= 2^scale)."""
    total = 0
    for n, d in ratios:
        total += n << (scale - (d.bit_length() - 1))
    return Fraction(total, 1 << scale)

def exact_of(x):
    """Exact sum of the float array x (f16/f32/f64 values are exact doubles)."""
    return exact_sum((float(v).as_integer_ratio() for v in x.astype(np.float64)), 1100)

def exact_dot(x, y):
    def ratios():
        for a, b in zip(x.astype(np.float64), y.astype(np.float64)):
            na, da = float(a).as_integer_ratio()
            nb, db = float(b).as_integer_ratio()
            yield na * nb, da * db
    return exact_sum(ratios(), 2200)

def to_f64(F):
    try:
        return float(F)  # int / int: correctly rounded, ties to even
    except OverflowError:
        return math.inf if F > 0 else -math.inf

def to_f32(F):
    """F rounded once to float32 (nearest, ties to even): no double rounding through f64."""
    c = np.float32(to_f64(F))
    if np.isinf(c):
        return c
    cands = [np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))]
    cands = [v for v in cands if np.isfinite(v)]
    return min(cands, key=lambda v: (abs(Fraction(float(v)) - F), int(v.view(np.uint32)) & 1))

def arg_ok(out, value, index):
    """`reduce --value-only --op argmin/argmax` prints the value, then the index."""
    parts = out.split()
    return len(parts) == 2 and parts[1] == str(index) and float(parts[0]) == float(value)

def ulp(v, dt):
    v = dt(v)
    return float(np.spacing(np.abs(v))) if np.isfinite(v) else math.inf

def to_bf16_bits(x32):
    """float32 -> bfloat16 bits (round to nearest even); and the exact values they hold."""
    u = x32.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return b, (b.astype(np.uint32) << 16).view(np.float32)

# ---- argmin / argmax: value and first index, ties, NaN policies ---------------------------------

for dt in ["float32", "float64", "int32", "int8", "float16"]:
    x = rng.integers(-500, 500, 1_000_003).astype(dt)  # many ties: the first index must win
    if dt == "int8":
        x = rng.integers(-128, 127, 1_000_003, endpoint=True).astype(dt)
    path = save(f"arg_{dt}.npy", x)
    for op, ref in (("argmax", np.argmax), ("argmin", np.argmin)):
        rc, out, err = run("--op", op, path)
        i = int(ref(x))
        check(f"{op} {dt} (ties: first index)", out or err, f"{x[i]} {i}", rc == 0 and arg_ok(out, x[i], i))

for dt in [np.float32, np.float64]:
    name = np.dtype(dt).name
    x = rng.uniform(-1, 1, 100_001).astype(dt)
    x[[777, 5000, 90_000]] = np.nan
    path = save(f"nan_{name}.npy", x)
    for op, ref in (("argmax", np.argmax), ("argmin", np.argmin)):
        # numpy's argmax/argmin return the first NaN's index, as tally's default policy does.
        rc, out, err = run("--op", op, path)
        parts = out.split()
        ok = rc == 0 and len(parts) == 2 and int(parts[1]) == int(ref(x)) == 777 and math.isnan(float(parts[0]))
        check(f"{op} {name} with NaN (propagate)", out or err, f"nan {ref(x)}", ok)
    for op, ref in (("argmax", np.nanargmax), ("argmin", np.nanargmin)):
        rc, out, err = run("--op", op, "--nan", "ignore", path)
        i = int(ref(x))
        parts = out.split()
        ok = rc == 0 and len(parts) == 2 and int(parts[1]) == i and same_bits(parts[0], x[i], dt)
        check(f"{op} {name} --nan ignore vs np.{ref.__name__}", out or err, f"{x[i]} {i}", ok)
    for op, ref in (("max", np.nanmax), ("min", np.nanmin)):
        rc, out, err = run("--op", op, "--nan", "ignore", path)
        check(f"{op} {name} --nan ignore vs np.{ref.__name__}", out or err, ref(x),
              rc == 0 and same_bits(out, ref(x), dt))
        rc, out, err = run("--op", op, path)
        check(f"{op} {name} with NaN (propagate)", out or err, "nan", rc == 0 and math.isnan(float(out)))
    last = rng.uniform(-1, 1, 4099).astype(dt)
    last[-1] = np.nan
    rc, out, err = run("--op", "argmax", save(f"nan_last_{name}.npy", last))
    check(f"argmax {name} NaN only at the last index", out or err, f"nan {len(last) - 1}",
          rc == 0 and out.split()[-1] == str(len(last) - 1))
    allnan = np.full(1000, np.nan, dtype=dt)
    path = save(f"allnan_{name}.npy", allnan)
    rc, out, err = run("--op", "argmax", "--nan", "ignore", path)
    parts = out.split()
    check(f"argmax {name} all NaN --nan ignore: index -1", out or err, "nan -1",
          rc == 0 and len(parts) == 2 and math.isnan(float(parts[0])) and parts[1] == "-1")

# ---- f16 (.npy '<f2') and bf16 (raw) inputs, accumulated in f32 ---------------------------------

ones16 = save("ones_f16.npy", np.ones(70_000, dtype=np.float16))
rc, out, err = run(ones16)
check("sum f16 70000 ones (f32 accumulation)", out or err, 70000, rc == 0 and out == "70000")
rc, out, err = run("--op", "mean", ones16)
check("mean f16 70000 ones", out or err, 1, rc == 0 and out == "1")
bf_ones = raw("ones.bf16", np.full(70_000, 0x3F80, dtype=np.uint16))  # bfloat16 1.0
rc, out, err = run("--dtype", "bf16", bf_ones)
check("sum bf16 70000 ones (raw file)", out or err, 70000, rc == 0 and out == "70000")
h = rng.uniform(-1, 1, 300_001).astype(np.float16)
hp = save("rand_f16.npy", h)
b_bits, b = to_bf16_bits(rng.uniform(-1, 1, 300_001).astype(np.float32))
bp = raw("rand.bf16", b_bits)
for name, vals, args in (("f16", h, [hp]), ("bf16", b, ["--dtype", "bf16", bp])):
    exact = to_f64(exact_of(vals))
    tol = 1e-5 * float(np.abs(vals.astype(np.float64)).sum())
    rc, out, err = run(*args)
    check(f"sum {name} n={len(vals)}", out or err, exact, rc == 0 and abs(float(out) - exact) <= tol)
    rc, out, err = run("--op", "max", *args)
    check(f"max {name}", out or err, vals.max(), rc == 0 and float(out) == float(vals.max()))
    rc, out, err = run("--op", "argmin", *args)
    i = int(np.argmin(vals))
    check(f"argmin {name}", out or err, f"{vals[i]} {i}", rc == 0 and arg_ok(out, vals[i], i))
    rc, out, err = run("--mode", "exact", *args)
    want = to_f32(exact_of(vals))
    check(f"sum {name} --mode exact (bitwise, f32 result)", out or err, want,
          rc == 0 and same_bits(out, want, np.float32))

# ---- mean, sum_sq, norm2 -----------------------------------------------------------------------

for dt in [np.float32, np.float64]:
    name = np.dtype(dt).name
    x = rng.uniform(-1, 3, 1_000_001).astype(dt)
    path = save(f"mean_{name}.npy", x)
    xd = x.astype(np.float64)
    fs = math.fsum(xd)
    n = len(x)
    rc, out, err = run("--op", "mean", path)
    tol = (1e-5 if dt == np.float32 else 1e-13) * float(np.abs(xd).sum()) / n
    check(f"mean {name} vs np.mean", out or err, np.mean(xd), rc == 0 and abs(float(out) - fs / n) <= tol)
    # exact: (exact sum rounded to f64) / n, rounded to the result type.
    want = dt(fs / n)
    rc, out, err = run("--op", "mean", "--mode", "exact", path)
    check(f"mean {name} --mode exact (bitwise)", out or err, want, rc == 0 and same_bits(out, want, dt))
    sq = math.fsum(v * v for v in xd)  # f32 squares are exact in f64
    rc, out, err = run("--op", "sum_sq", path)
    rel = 2.0 ** -23 if dt == np.float32 else 1e-13
    check(f"sum_sq {name}", out or err, sq, rc == 0 and abs(float(out) - sq) <= rel * sq)
    rc, out, err = run("--op", "norm2", path)
    check(f"norm2 {name}", out or err, math.sqrt(sq), rc == 0 and abs(float(out) - math.sqrt(sq)) <= rel * math.sqrt(sq))
i = rng.integers(-1_000_000, 1_000_000, 999_999, dtype=np.int32)
rc, out, err = run("--op", "mean", save("mean_i32.npy", i))
want = int(i.astype(np.int64).sum()) / len(i)  # exact int sum / n, correctly rounded
check("mean i32 (exact 64-bit sum / n)", out or err, want, rc == 0 and float(out) == want)
for dt, big, small in ((np.float32, 1e30, 1e-30), (np.float64, 1e200, 1e-200)):
    name = np.dtype(dt).name
    for scale in (big, small):
        x = np.array([3 * scale, 4 * scale, 0.0], dtype=dt)
        want = math.hypot(*[float(v) for v in x])
        rc, out, err = run("--op", "norm2", save(f"norm_{name}_{scale:g}.npy", x))
        rel = 2.0 ** -22 if dt == np.float32 else 2.0 ** -50
        check(f"norm2 {name} [3, 4] x {scale:g}: no overflow/underflow in the squares", out or err, want,
              rc == 0 and math.isfinite(float(out)) and abs(float(out) - want) <= rel * want)

# ---- accuracy modes: exact vs math.fsum (bitwise), compensated within a few ulps ----------------

a = rng.uniform(-1, 1, 200_000) * 10.0 ** rng.integers(-20, 21, 200_000)
ill = np.concatenate([a, -a[:100_000], rng.uniform(-1, 1, 1001) * 1e-5])  # heavy cancellation
rng.shuffle(ill)
ill_path = save("ill_f64.npy", ill)
fs = math.fsum(ill)
rc, out, err = run("--mode", "exact", ill_path)
check("sum f64 --mode exact vs math.fsum (repr)", out or err, repr(fs), rc == 0 and repr(float(out)) == repr(fs))
shuffled = ill.copy()
rng.shuffle(shuffled)
rc2, out2, err2 = run("--mode", "exact", save("ill_f64_shuffled.npy", shuffled))
check("sum f64 --mode exact: order-independent", out2 or err2, out, rc2 == 0 and out2 == out)
ill32 = ill.astype(np.float32)
want = to_f32(exact_of(ill32))
rc, out, err = run("--mode", "exact", save("ill_f32.npy", ill32))
check("sum f32 --mode exact vs exact rounded once (bitwise)", out or err, want,
      rc == 0 and same_bits(out, want, np.float32))
for dt in [np.float32, np.float64]:
    name = np.dtype(dt).name
    x = rng.uniform(0, 1, 2_000_003).astype(dt)
    path = save(f"comp_{name}.npy", x)
    ex = exact_of(x)
    want = to_f32(ex) if dt == np.float32 else to_f64(ex)
    rc, out, err = run("--mode", "compensated", path)
    check(f"sum {name} --mode compensated within 4 ulps", out or err, want,
          rc == 0 and abs(float(out) - float(want)) <= 4 * ulp(want, dt))
    rc, out, err = run("--mode", "exact", path)
    check(f"sum {name} --mode exact (bitwise)", out or err, want, rc == 0 and same_bits(out, want, dt))
    rc, out, err = run("--mode", "fast", path)
    tol = (2 ** -24 if dt == np.float32 else 2 ** -53) * (len(x) / 256 + 64) * float(np.abs(x.astype(np.float64)).sum())
    check(f"sum {name} --mode fast within gamma_h sum|x|", out or err, want,
          rc == 0 and abs(float(out) - float(want)) <= tol + ulp(want, dt))
for vals, want, what in (([math.inf, -math.inf, 1.0], math.nan, "inf + -inf gives NaN"),
                         ([1.7e308, 1.7e308], math.inf, "exact sum beyond the range gives inf"),
                         ([1.7e308, 1.7e308, -1.7e308], 1.7e308, "in range though the partial sums overflow")):
    rc, out, err = run("--mode", "exact", save("special.npy", np.array(vals, dtype=np.float64)))
    check(f"sum f64 --mode exact: {what}", out or err, want, rc == 0 and same_bits(out, want))

# ---- tally stats vs numpy (var with ddof 0 and 1) ----------------------------------------------

def stats(*args):
    rc, out, err = command("stats", "--json", *args)
    if rc != 0:
        return None, err
    return json.loads(out), out

def stats_close(got, want, tol):
    g = float(got)
    if math.isnan(want):
        return math.isnan(g)
    return abs(g - want) <= tol

cases = [("f32 shifted", rng.uniform(-1, 1, 1_000_003).astype(np.float32) + np.float32(1000)),
         ("f64", rng.normal(5, 2, 1_000_003)),
         ("i32", rng.integers(-100_000, 100_000, 777_777, dtype=np.int32)),
         ("f16", rng.uniform(-4, 4, 100_000).astype(np.float16))]
for name, x in cases:
    path = save(f"stats_{name.split()[0]}.npy", x)
    xd = x.astype(np.float64)
    for ddof in (0, 1):
        got, text = stats("--ddof", str(ddof), path)
        if got is None:
            check(f"stats {name} ddof {ddof}", text, "", False)
            continue
        # Sums in f64: |error| <= gamma_h * sum|x| (h < 2^14 here); the variance against numpy's
        # two-pass f64 variance, relatively (the data's condition number stays below 1e7).
        want = {"sum": math.fsum(xd), "min": float(xd.min()), "max": float(xd.max()), "mean": math.fsum(xd) / len(x),
                "variance": float(np.var(xd, ddof=ddof)), "stddev": float(np.std(xd, ddof=ddof))}
        mag = float(np.abs(xd).sum())
        tols = {"sum": 1e-12 * mag, "min": 0.0, "max": 0.0, "mean": 1e-12 * mag / len(x),
                "variance": 1e-8 * want["variance"], "stddev": 1e-8 * want["stddev"]}
        ok = got["count"] == len(x) and all(stats_close(got[k], w, tols[k]) for k, w in want.items())
        check(f"stats {name} ddof {ddof}", text.replace("\n", " "), want, ok)
x = rng.normal(0, 1, 50_001)
x[[3, 4000, 50_000]] = np.nan
path = save("stats_nan.npy", x)
got, text = stats(path)
check("stats f64 with NaN (propagate): NaN", text.replace("\n", " "), "nan",
      got is not None and all(math.isnan(float(got[k])) for k in ("sum", "min", "max", "mean", "variance")))
got, text = stats("--nan", "ignore", "--ddof", "1", path)
want = {"sum": float(np.nansum(x)), "min": float(np.nanmin(x)), "max": float(np.nanmax(x)),
        "mean": float(np.nanmean(x)), "variance": float(np.nanvar(x, ddof=1))}
mag = float(np.nansum(np.abs(x)))
tols = {"sum": 1e-12 * mag, "min": 0.0, "max": 0.0, "mean": 1e-12 * mag / (len(x) - 3), "variance": 1e-10 * want["variance"]}
check("stats f64 --nan ignore vs np.nan*", text.replace("\n", " "), want,
      got is not None and got["count"] == 50_001 - 3 and all(stats_close(got[k], w, tols[k]) for k, w in want.items()))
got, text = stats(save("stats_empty.npy", np.zeros(0, dtype=np.float32)))
check("stats of an empty file: count 0, NaN mean", text.replace("\n", " "), "0 nan",
      got is not None and got["count"] == 0 and math.isnan(float(got["mean"])))

# ---- tally dot vs numpy (float64 reference) and the exact dot ----------------------------------

def dot(*args):
    return command("dot", "--value-only", *args)

for dt in [np.float32, np.float64, np.float16]:
    name = np.dtype(dt).name
    n = 200_003
    x = rng.uniform(-1, 1, n).astype(dt)
    y = rng.uniform(-1, 1, n).astype(dt)
    px, py = save(f"dot_x_{name}.npy", x), save(f"dot_y_{name}.npy", y)
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    ref = float(np.dot(xd, yd))
    ex = exact_dot(x, y)
    mag = float(np.abs(xd * yd).sum())
    rdt = np.float64 if dt == np.float64 else np.float32
    u = 2.0 ** -53 if dt == np.float64 else 2.0 ** -24
    rc, out, err = dot(px, py)
    check(f"dot {name} vs np.dot (f64 reference)", out or err, ref,
          rc == 0 and abs(float(out) - to_f64(ex)) <= u * (n / 256 + 64) * mag + ulp(to_f64(ex), rdt))
    want = to_f64(ex) if dt == np.float64 else to_f32(ex)
    rc, out, err = dot("--mode", "exact", px, py)
    check(f"dot {name} --mode exact (bitwise)", out or err, want, rc == 0 and same_bits(out, want, rdt))
    rc, out, err = dot("--mode", "compensated", px, py)
    check(f"dot {name} --mode compensated", out or err, want,
          rc == 0 and abs(float(out) - float(want)) <= 4 * ulp(want, rdt) + 4 * u * u * mag)
bx, bxv = to_bf16_bits(rng.uniform(-1, 1, 100_001).astype(np.float32))
by, byv = to_bf16_bits(rng.uniform(-1, 1, 100_001).astype(np.float32))
want = to_f32(exact_dot(bxv, byv))
rc, out, err = dot("--dtype", "bf16", "--mode", "exact", raw("dot_x.bf16", bx), raw("dot_y.bf16", by))
check("dot bf16 (raw files) --mode exact (bitwise)", out or err, want, rc == 0 and same_bits(out, want, np.float32))
rc, out, err = dot(save("dot_a.npy", np.ones(3, np.float32)), save("dot_b.npy", np.ones(4, np.float32)))
check("dot of different lengths is refused", err, "error", rc != 0 and "same length" in err)

# `tally reduce --axis K -o OUT.npy` against numpy's reductions along the same axes, C and Fortran
# order, sums exact for integers and tolerance-checked for floats, argmax as int64 indices.
for order in ("C", "F"):
    for dt in (np.int32, np.float32, np.float64):
        shape = (7, 33, 65, 3)
        a = rng.integers(-50, 50, shape).astype(dt) if dt == np.int32 else rng.uniform(-1, 1, shape).astype(dt)
        a = np.asfortranarray(a) if order == "F" else np.ascontiguousarray(a)
        src = os.path.join(work, f"axis_{order}_{np.dtype(dt).name}.npy")
        np.save(src, a)
        for axes in ((0,), (1,), (2,), (-1,), (1, 2), (0, 1)):
            for op in ("sum", "max", "argmax", "mean"):
                if op == "argmax" and len(axes) > 1:
                    continue
                dst = os.path.join(work, "axis_out.npy")
                rc, out, err = command("reduce", "--op", op, "--axis", ",".join(map(str, axes)), "-o", dst, src)
                name = f"{op} --axis {axes} {np.dtype(dt).name} {order}-order"
                if rc != 0:
                    check(name, err, "", False)
                    continue
                got = np.load(dst)
                if op == "argmax":
                    want = np.argmax(a, axis=axes[0])
                    ok = got.dtype == np.int64 and got.shape == want.shape and np.array_equal(got, want)
                elif op == "max":
                    want = np.max(a, axis=axes)
                    ok = got.shape == want.shape and np.array_equal(got, want)
                elif dt == np.int32:
                    want = (np.sum(a.astype(np.int64), axis=axes) if op == "sum"
                            else np.sum(a.astype(np.int64), axis=axes) / np.prod([a.shape[k] for k in axes]))
                    ok = got.shape == want.shape and (np.array_equal(got, want) if op == "sum" else np.allclose(got, want, rtol=1e-15))
                else:
                    want = getattr(np, op)(a.astype(np.float64), axis=axes)
                    eps = 1e-5 if dt == np.float32 else 1e-13
                    ok = got.shape == want.shape and np.allclose(got, want, rtol=eps, atol=eps)
                check(name, f"{got.shape} {got.dtype}", f"{want.shape}", bool(ok))
# `tally stats --axis K -o OUT.npy`: the remaining shape plus 7 fields (count, sum, min, max, mean,
# variance, stddev with --ddof) against numpy's, C and Fortran order.
for order in ("C", "F"):
    for dt in (np.int32, np.float32, np.float64):
        src = os.path.join(work, f"axis_{order}_{np.dtype(dt).name}.npy")
        a = np.load(src).astype(np.float64)
        for axes in ((0,), (2,), (-1,), (1, 2)):
            for ddof in (0, 1):
                dst = os.path.join(work, "stats_out.npy")
                rc, out, err = command("stats", "--axis", ",".join(map(str, axes)), "--ddof", str(ddof), "-o", dst, src)
                name = f"stats --axis {axes} --ddof {ddof} {np.dtype(dt).name} {order}-order"
                if rc != 0:
                    check(name, err, "", False)
                    continue
                got = np.load(dst)
                count = np.prod([a.shape[k] for k in axes])
                want = np.stack([np.full(np.sum(a, axis=axes).shape, float(count)), np.sum(a, axis=axes),
                                 np.min(a, axis=axes), np.max(a, axis=axes), np.mean(a, axis=axes),
                                 np.var(a, axis=axes, ddof=ddof), np.std(a, axis=axes, ddof=ddof)], axis=-1)
                ok = got.dtype == np.float64 and got.shape == want.shape and np.allclose(got, want, rtol=1e-9, atol=1e-9)
                check(name, f"{got.shape} {got.dtype}", f"{want.shape}", bool(ok))
rc, out, err = command("stats", "-o", os.path.join(work, "stats_out.npy"), os.path.join(work, "axis_C_int32.npy"))
check("stats -o without --axis is refused", err, "error", rc != 0 and "--axis" in err)

rc, out, err = command("reduce", "--axis", "4", os.path.join(work, "axis_C_int32.npy"))
check("--axis 4 of a 4-d array is refused", err, "error", rc != 0 and "out of range" in err)

print(f"{bad} mismatches")
sys.exit(1 if bad else 0)
