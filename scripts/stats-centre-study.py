#!/usr/bin/env python3
"""What the stats block merge costs in accuracy (issue 9; docs/tuning.md, "Where the exact sum's
small-size time goes"). One block of 512 threads, thread t taking elements t, t + 512, ... in f64
as the kernel does (each thread centred on its first element; each fma rounded once, emulated
exactly with integers), its accumulators merged four ways:
  today's (ops_stats.cuh, block_reduce): two levels of means; a warp's (n, sum) gives its mean
    c_w = sum_w x (1/n_w), its lanes re-centred on c_w and summed; the block's (n, sum) gives mu,
    the warps re-centred on mu and summed (the kernel's butterfly orders: trees over bit-reversed
    lanes);
  two trees, block mean (the merge until 2026-11-28): the block's mean from a tree of (n, sum),
    every thread re-centred on it, a tree of the re-centred (s1, s2);
  warp centre: each warp about its first element (plain adds inside the warp), the warps
    re-centred on the block's mean;
  block centre: one centre for the block (its first element: one tree of plain adds).
Prints the relative error of m2 = s2 - s1^2 / n against the exact m2 (integers, Fractions) as a
markdown table; from B x 512 elements a second one for B blocks (--blocks, default 8), the last
block merging one partial a thread: the two trees with s1 dropped (their first form, s1 = 0 out
of every block), the two trees, today's, one tree a block (today's in the last), one tree in both:
  python3 scripts/stats-centre-study.py [--blocks B] [n ...]
(default 1024 16384, 8 blocks: about 2 s; --blocks 132 1048579 emulates the H100's grid for
2^20 + 3 f64 statistics: about a minute)"""
import argparse
import math

import numpy as np
from fractions import Fraction as F

def fma(a, b, c):  # correctly rounded a*b+c: floats are p / 2^k, and int / int rounds once
    pa, qa = a.as_integer_ratio(); pb, qb = b.as_integer_ratio(); pc, qc = c.as_integer_ratio()
    q = qa * qb
    return (pa * pb * (qc // q) + pc) / qc if qc >= q else (pa * pb + pc * (q // qc)) / q

def exact_m2(x):  # sum x^2 - (sum x)^2 / n on a common denominator 2^k
    r = [float(v).as_integer_ratio() for v in x]; q = max(d for _, d in r)
    xs = [p * (q // d) for p, d in r]; n = len(xs); s = sum(xs)
    return F(n * sum(v * v for v in xs) - s * s, n * q * q)

def add(a, b):
    return a + b

def tree(vals, add=add):
    vals = list(vals)
    while len(vals) > 1:
        vals = [add(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]

def bfly(vals):
    """A warp's butterfly sum (xor 16, 8, ... or shfl_down): a tree over the bit-reversed lanes
    (padded with zeros to a power of two, as the kernel's idle lanes are)."""
    vals = list(vals); k = max(len(vals) - 1, 0).bit_length()
    vals += [0.0] * ((1 << k) - len(vals))
    return tree(vals[int(f"{i:0{k}b}"[::-1] or "0", 2)] for i in range(len(vals)))

def per_thread(x, T):
    return [x[t::T] for t in range(T)]

def strategy_shared(x, T):
    c = float(x[0]); s1s = []; s2s = []
    for xs in per_thread(x, T):
        s1 = s2 = 0.0
        for v in xs:
            d = float(v) - c; s1 += d; s2 = fma(d, d, s2)
        s1s.append(s1); s2s.append(s2)
    S1 = tree(s1s); S2 = tree(s2s)
    n = float(len(x))
    return S2 - S1 * (S1 / n)

def strategy_warp(x, T):
    """Each warp's threads about the warp's first element (plain adds inside the warp), the warps'
    accumulators re-centred on the block mean as the two trees' threads are."""
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
        accs.append((float(cnt), c, tree(s1s), tree(s2s), tree(sms)))
    n = tree([a[0] for a in accs])
    mu = tree([a[4] for a in accs]) / n
    m2s = [fma(c - mu, fma(nt, c - mu, 2.0 * s1), s2) for (nt, c, s1, s2, _) in accs]
    return tree(m2s)

def thread_sums(xs, c):
    """A thread's (n, centre, s1, s2, sum) about c (c None: its first element, as the kernel)."""
    if len(xs) == 0:
        return (0.0, 0.0, 0.0, 0.0, 0.0)
    c = float(xs[0]) if c is None else c
    s1 = s2 = sm = 0.0
    for v in xs:
        v = float(v); d = v - c; s1 += d; s2 = fma(d, d, s2); sm += v
    return (float(len(xs)), c, s1, s2, sm)

def moved(a, to):
    """Accumulator a's (s1, s2) re-centred on to: s1 + n d, s2 + d (2 s1 + n d), d = c - to."""
    n, c, s1, s2, _ = a
    if not n: return (0.0, 0.0)
    d = c - to
    return (fma(n, d, s1), fma(d, fma(n, d, 2.0 * s1), s2))

def two_level(accs):
    """Today's block merge (ops_stats.cuh, block_reduce): per warp of 32 accumulators the mean
    c_w = sum_w x (1/n_w) (1/n_w correctly rounded; the kernel's refined reciprocal is within an
    ulp) from butterfly sums of (n, sum), the lanes re-centred on c_w and their (s1, s2) summed;
    then over the warps the block's mean mu the same way, the warps re-centred on it and summed.
    An empty warp gives zeros. Returns (n, mu, s1, s2, sum)."""
    warps = []
    for w in range(0, len(accs), 32):
        lanes = accs[w: w + 32]
        if not any(a[0] for a in lanes): warps.append((0.0, 0.0, 0.0, 0.0, 0.0)); continue
        nw = bfly(a[0] for a in lanes); sw = bfly(a[4] for a in lanes)
        cw = sw * (1.0 / nw)
        m = [moved(a, cw) for a in lanes]
        warps.append((nw, cw, bfly(v[0] for v in m), bfly(v[1] for v in m), sw))
    n = bfly(a[0] for a in warps); sm = bfly(a[4] for a in warps)
    mu = sm * (1.0 / n) if n else 0.0
    m = [moved(a, mu) for a in warps]
    return (n, mu, bfly(v[0] for v in m), bfly(v[1] for v in m), sm)

def two_tree(accs, carry_s1=True):
    """The block merge until 2026-11-28: the mean mu = sum / n from a tree of (n, sum), each
    accumulator re-centred on it, trees of the re-centred s2 and s1. Returns (n, mu, s1, s2, sum).
    carry_s1=False: its first form, which returned s1 = 0 (mu is rounded, so the true s1 about it
    is not zero, and a later merge lost 2 d s1)."""
    n = tree([a[0] for a in accs])
    sm = tree([a[4] for a in accs])
    mu = sm / n
    m = [moved(a, mu) for a in accs]
    return (n, mu, tree(v[0] for v in m) if carry_s1 else 0.0, tree(v[1] for v in m), sm)

def two_tree_before(accs):
    return two_tree(accs, carry_s1=False)

def one_tree(accs):
    """Every accumulator re-centred on the first one's centre, then plain add trees."""
    c = next(a[1] for a in accs if a[0])
    m = [moved(a, c) for a in accs]
    return (tree(a[0] for a in accs), c, tree(v[0] for v in m), tree(v[1] for v in m),
            tree(a[4] for a in accs))

def m2_of(acc):
    n, _, s1, s2, _ = acc
    return s2 if s1 == 0.0 else s2 - s1 * (s1 / n)

def grid(th, T, block_merge, last_merge):
    """len(th) / T blocks of T threads' accumulators (the strided layout: element i to thread
    i mod (blocks T)); each block merged by block_merge, the partials by last_merge (the last
    block: one partial a thread, identities in the rest)."""
    parts = [block_merge(th[b: b + T]) for b in range(0, len(th), T)]
    return m2_of(last_merge(parts + [(0.0, 0.0, 0.0, 0.0, 0.0)] * (T - len(parts))))

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
kinds = ("uniform", "offset 1e6, sd 1", "uniform in [1e6, 1e6 + 1]", "ramp",
         "x0 = 1e4, rest N(0,1)", "x0 = 1e8, rest N(0,1)", "x0 = 1, rest 0")
multi = []
print("| n | input | data | m2 rel. error, today's (warp means, block mean) |"
      " two trees, block mean (until 2026-11-28) | warp centre | block centre |")
print("|---|---|---|---|---|---|---|")
for n in args.n:
    for dt in (np.float32, np.float64):
        for kind in kinds:
            x = data(kind, n, dt)
            ex = exact_m2(x)
            if ex == 0: continue
            rel = lambda m2: f"{float(abs(F(m2) - ex) / ex):.1e}"
            row = f"| 2^{int(math.log2(n))} | {np.dtype(dt).name} | {kind} |"
            th = [thread_sums(xs, None) for xs in per_thread(x, T)]
            print(row, rel(m2_of(two_level(th))), "|", rel(m2_of(two_tree(th))), "|",
                  rel(strategy_warp(x, T)), "|", rel(strategy_shared(x, T)), "|")
            if n >= B * T:  # several blocks: the last block's merge too
                th = [thread_sums(xs, None) for xs in per_thread(x, B * T)]
                multi.append(" ".join([row] + [rel(grid(th, T, bm, lm)) + " |" for bm, lm in (
                    (two_tree_before, two_tree_before), (two_tree, two_tree),
                    (two_level, two_level), (one_tree, two_level), (one_tree, one_tree))]))
if multi:
    print(f"\n{B} blocks:\n\n| n | input | data | two trees, s1 dropped (first form) |"
          " two trees, block mean (until 2026-11-28) | today's (warp means, block mean) |"
          " one tree a block, today's in the last | one tree in both |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(multi))
