#!/usr/bin/env python3
"""What a cheaper block merge would cost the statistics' accuracy (issue 9; docs/tuning.md, "Where
the exact sum's small-size time goes"). One block of 512 threads, thread t taking elements t,
t + 512, ... in f64 as the kernel does (each fma rounded once, via exact rationals), three ways:
today's (each thread centred on its first element, re-centred on the block mean: two trees), each
warp centred on its first element (plain adds inside the warp, re-centred across warps), and
one centre for the block (its first element: one tree of plain adds). Prints the relative error
of m2 against the exact m2 (Fractions) as a markdown table:
  python3 scripts/stats-centre-study.py [n ...]   (default 1024 16384; about 7 s)"""
import numpy as np, math, sys
from fractions import Fraction as F

def fma(a, b, c):  # correctly rounded a*b+c
    return float(F(a) * F(b) + F(c))

def exact_m2(x):
    xs = [F(float(v)) for v in x]
    n = len(xs); mean = sum(xs) / n
    return sum((v - mean) ** 2 for v in xs)

def tree(vals, add):
    vals = list(vals)
    while len(vals) > 1:
        vals = [add(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i] for i in range(0, len(vals), 2)]
    return vals[0]

def per_thread(x, T):
    return [x[t::T] for t in range(T)]

def strategy_current(x, T):
    accs = []
    for xs in per_thread(x, T):
        if len(xs) == 0: accs.append((0.0, 0.0, 0.0, 0.0, 0.0)); continue
        c = float(xs[0]); s1 = s2 = sm = 0.0
        for v in xs:
            v = float(v); d = v - c; s1 += d; s2 = fma(d, d, s2); sm += v
        accs.append((float(len(xs)), c, s1, s2, sm))
    n = tree([a[0] for a in accs], lambda a, b: a + b)
    sm = tree([a[4] for a in accs], lambda a, b: a + b)
    mu = sm / n
    m2s = []
    for (nt, c, s1, s2, _) in accs:
        if nt == 0: m2s.append(0.0); continue
        d = c - mu
        m2s.append(fma(d, fma(nt, d, 2.0 * s1), s2))
    return tree(m2s, lambda a, b: a + b)

def strategy_shared(x, T):
    c = float(x[0]); s1s = []; s2s = []
    for xs in per_thread(x, T):
        s1 = s2 = 0.0
        for v in xs:
            d = float(v) - c; s1 += d; s2 = fma(d, d, s2)
        s1s.append(s1); s2s.append(s2)
    S1 = tree(s1s, lambda a, b: a + b); S2 = tree(s2s, lambda a, b: a + b)
    n = float(len(x))
    return S2 - S1 * (S1 / n)

def strategy_warp(x, T):
    """Each warp's threads about the warp's first element (plain adds inside the warp), the warps'
    accumulators re-centred on the block mean as today's threads are."""
    th = per_thread(x, T); accs = []
    for w in range(T // 32):
        lanes = th[32 * w: 32 * w + 32]
        if len(lanes[0]) == 0: continue
        c = float(lanes[0][0]); s1s = []; s2s = []; sms = []; cnt = 0
        for xs in lanes:
            s1 = s2 = sm = 0.0
            for v in xs:
                v = float(v); d = v - c; s1 += d; s2 = fma(d, d, s2); sm += v
            s1s.append(s1); s2s.append(s2); sms.append(sm); cnt += len(xs)
        accs.append((float(cnt), c, tree(s1s, lambda a, b: a + b), tree(s2s, lambda a, b: a + b), tree(sms, lambda a, b: a + b)))
    n = tree([a[0] for a in accs], lambda a, b: a + b)
    mu = tree([a[4] for a in accs], lambda a, b: a + b) / n
    m2s = [fma(c - mu, fma(nt, c - mu, 2.0 * s1), s2) for (nt, c, s1, s2, _) in accs]
    return tree(m2s, lambda a, b: a + b)

rng = np.random.default_rng(3)
def data(kind, n, dt):
    if kind == "uniform": x = rng.random(n)
    elif kind == "offset 1e6, sd 1": x = 1e6 + rng.standard_normal(n)
    elif kind == "x0 = 1e4, rest N(0,1)": x = rng.standard_normal(n); x[0] = 1e4
    elif kind == "x0 = 1, rest 0": x = np.zeros(n); x[0] = 1
    elif kind == "ramp": x = np.arange(n, dtype=np.float64)
    elif kind == "x0 = 1e8, rest N(0,1)": x = rng.standard_normal(n); x[0] = 1e8
    return x.astype(dt).astype(np.float64)

T = 512
print("| n | input | data | m2 rel. error, today's | warp centre | block centre |")
print("|---|---|---|---|---|---|")
for n in map(int, sys.argv[1:] or ["1024", "16384"]):
    for dt in (np.float32, np.float64):
        for kind in ("uniform", "offset 1e6, sd 1", "ramp", "x0 = 1e4, rest N(0,1)", "x0 = 1e8, rest N(0,1)", "x0 = 1, rest 0"):
            x = data(kind, n, dt)
            ex = exact_m2(x)
            if ex == 0: continue
            ra = abs(F(strategy_current(x, T)) - ex) / ex
            rb = abs(F(strategy_shared(x, T)) - ex) / ex
            rw = abs(F(strategy_warp(x, T)) - ex) / ex
            print(f"| 2^{int(math.log2(n))} | {np.dtype(dt).name} | {kind} | {float(ra):.1e} | {float(rw):.1e} | {float(rb):.1e} |")
