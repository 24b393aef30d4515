#!/usr/bin/env python3
"""What a cheaper block merge would cost the statistics' accuracy (issue 9; docs/tuning.md, "Where
the exact sum's small-size time goes"). One block of 512 threads, thread t taking elements t,
t + 512, ... in f64 as the kernel does (each fma rounded once, via exact rationals), three ways:
today's (each thread centred on its first element, re-centred on the block mean: two trees), each
warp centred on its first element (plain adds inside the warp, re-centred across warps), and
one centre for the block (its first element: one tree of plain adds). Prints the relative error
of m2 against the exact m2 (Fractions) as a markdown table; from 8 x 512 elements a second table
for 8 blocks, the last block's merge included (where the merge that dropped s1 lost accuracy):
  python3 scripts/stats-centre-study.py [--blocks B] [n ...]   (default 1024 16384, 8 blocks: about 7 s;
  --blocks 132 1048579 emulates the H100's grid for 2^20 + 3 f64 statistics, a few minutes)"""
import argparse
import math

import numpy as np
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

def thread_sums(xs, c):
    """A thread's (n, centre, s1, s2, sum) about c (c None: its first element, as today)."""
    if len(xs) == 0:
        return (0.0, 0.0, 0.0, 0.0, 0.0)
    c = float(xs[0]) if c is None else c
    s1 = s2 = sm = 0.0
    for v in xs:
        v = float(v); d = v - c; s1 += d; s2 = fma(d, d, s2); sm += v
    return (float(len(xs)), c, s1, s2, sm)

def two_tree(accs, carry_s1=True):
    """The block merge (ops_stats.cuh, block_reduce): the mean mu from a tree of (n, sum), each
    accumulator re-centred on it, trees of the re-centred s2 and s1. Returns (n, mu, s1, s2, sum).
    carry_s1=False: the merge before 2026-11-28, which returned s1 = 0 (mu is rounded, so the
    true s1 about it is not zero, and a later merge lost 2 d s1)."""
    n = tree([a[0] for a in accs], lambda a, b: a + b)
    sm = tree([a[4] for a in accs], lambda a, b: a + b)
    mu = sm / n
    m2 = tree([fma(a[1] - mu, fma(a[0], a[1] - mu, 2.0 * a[2]), a[3]) if a[0] else 0.0 for a in accs],
              lambda a, b: a + b)
    s1 = tree([fma(a[0], a[1] - mu, a[2]) if a[0] else 0.0 for a in accs], lambda a, b: a + b)
    return (n, mu, s1 if carry_s1 else 0.0, m2, sm)

def two_tree_before(accs):
    return two_tree(accs, carry_s1=False)

def one_tree(accs):
    """Every accumulator re-centred on the first one's centre, then plain add trees."""
    c = next(a[1] for a in accs if a[0])
    moved = []
    for (nt, ct, s1, s2, sm) in accs:
        d = ct - c
        moved.append((nt, fma(nt, d, s1), fma(d, fma(nt, d, 2.0 * s1), s2), sm) if nt else (0.0, 0.0, 0.0, 0.0))
    n, S1, S2, sm = (tree([m[k] for m in moved], lambda a, b: a + b) for k in range(4))
    return (n, c, S1, S2, sm)

def m2_of(acc):
    n, _, s1, s2, _ = acc
    return s2 if s1 == 0.0 else s2 - s1 * (s1 / n)

def grid(x, T, blocks, block_merge, last_merge):
    """blocks x T threads on the strided layout (element i to thread i mod (blocks T)); each block
    merged by block_merge, the partials by last_merge (the last block)."""
    G = blocks * T
    parts = [block_merge([thread_sums(x[g::G], None) for g in range(b * T, (b + 1) * T)]) for b in range(blocks)]
    return m2_of(last_merge(parts))

rng = np.random.default_rng(3)
def data(kind, n, dt):
    if kind == "uniform": x = rng.random(n)
    elif kind == "offset 1e6, sd 1": x = 1e6 + rng.standard_normal(n)
    elif kind == "uniform in [1e6, 1e6 + 1]": x = rng.uniform(1e6, 1e6 + 1, n)
    elif kind == "x0 = 1e4, rest N(0,1)": x = rng.standard_normal(n); x[0] = 1e4
    elif kind == "x0 = 1, rest 0": x = np.zeros(n); x[0] = 1
    elif kind == "ramp": x = np.arange(n, dtype=np.float64)
    elif kind == "x0 = 1e8, rest N(0,1)": x = rng.standard_normal(n); x[0] = 1e8
    return x.astype(dt).astype(np.float64)

ap = argparse.ArgumentParser()
ap.add_argument("--blocks", type=int, default=8)
ap.add_argument("n", type=int, nargs="*", default=[1024, 16384])
args = ap.parse_args()
T = 512
B = args.blocks
multi = []
print("| n | input | data | m2 rel. error, today's | warp centre | block centre |")
print("|---|---|---|---|---|---|")
for n in args.n:
    for dt in (np.float32, np.float64):
        for kind in ("uniform", "offset 1e6, sd 1", "uniform in [1e6, 1e6 + 1]", "ramp", "x0 = 1e4, rest N(0,1)", "x0 = 1e8, rest N(0,1)", "x0 = 1, rest 0"):
            x = data(kind, n, dt)
            ex = exact_m2(x)
            if ex == 0: continue
            ra = abs(F(strategy_current(x, T)) - ex) / ex
            rb = abs(F(strategy_shared(x, T)) - ex) / ex
            rw = abs(F(strategy_warp(x, T)) - ex) / ex
            print(f"| 2^{int(math.log2(n))} | {np.dtype(dt).name} | {kind} | {float(ra):.1e} | {float(rw):.1e} | {float(rb):.1e} |")
            if n >= B * T:  # several blocks: the last block's merge too
                r0 = abs(F(grid(x, T, B, two_tree_before, two_tree_before)) - ex) / ex
                rt = abs(F(grid(x, T, B, two_tree, two_tree)) - ex) / ex
                r1 = abs(F(grid(x, T, B, one_tree, two_tree)) - ex) / ex
                r11 = abs(F(grid(x, T, B, one_tree, one_tree)) - ex) / ex
                multi.append(f"| 2^{int(math.log2(n))} | {np.dtype(dt).name} | {kind} | {float(r0):.1e} | {float(rt):.1e} | {float(r1):.1e} | {float(r11):.1e} |")
if multi:
    print(f"\n{B} blocks: | n | input | data | two trees, s1 dropped (before 2026-11-28) | two trees (now) | one tree a block, two in the last | one tree in both |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(multi))
