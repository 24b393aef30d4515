#!/usr/bin/env python3
"""The one-pass ops on the strided grid and on the dynamic schedule, side by side.

Reads what `scripts/gpu-check.sh OUT schedules` wrote (bench-core-{strided,dynamic}.json and
bench-numerics-{strided,dynamic}.json in OUT) and prints one markdown table: per op, dtype and size
(warm cache, 2^24 and up), the graph time of each schedule, the competitor's graph time in the same
run, each schedule's ratio (competitor / tally) and dynamic's speed-up over strided. Whether a
GPU's measured entry should turn the dynamic schedule on (src/core/policy.cpp) is read from it.

  python3 scripts/compare-schedules.py OUT [--min-log2 24]
"""
import argparse
import json
import math
import os
import sys


def rows_of(path):
    """(op, dtype, n) -> (tally graph us, competitor graph us), warm rows timed by graph replay."""
    with open(path) as f:
        report = json.load(f)
    out = {}
    for table in report["tables"]:
        for r in table["rows"]:
            if r.get("cache", "warm") != "warm" or r.get("graph_timed") is False:
                continue  # cold rows; rows whose graph capture failed (stream timing only: null here)
            ours, other = r.get("graph_tally_us"), r.get("graph_cub_us", r.get("graph_other_us"))
            if not all(isinstance(v, (int, float)) and v > 0 for v in (ours, other)):
                continue
            out[(r["op"], r["dtype"], r["n_elements"])] = (ours, other)
    return out, report.get("meta", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the directory gpu-check wrote")
    ap.add_argument("--min-log2", type=int, default=24, help="smallest size shown (log2 elements)")
    a = ap.parse_args()
    merged = {}
    device = "?"
    for bench in ["core", "numerics"]:
        paths = {s: os.path.join(a.out, f"bench-{bench}-{s}.json") for s in ["strided", "dynamic"]}
        if not all(os.path.exists(p) for p in paths.values()):
            print(f"(no bench {bench} pair in {a.out})", file=sys.stderr)
            continue
        strided, meta = rows_of(paths["strided"])
        dynamic, _ = rows_of(paths["dynamic"])
        device = meta.get("device", device)
        for key, s in strided.items():
            if key in dynamic and key[2] >= (1 << a.min_log2):
                merged[key] = (s, dynamic[key])
    if not merged:
        print("nothing to compare", file=sys.stderr)
        return 1
    print(f"# strided grid against dynamic schedule, graph replay, {device}\n")
    print("| op | dtype | n | strided us | ratio | dynamic us | ratio | competitor us (strided run / dynamic run) "
          "| dynamic speed-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    wins = losses = 0
    for (op, dt, n), (s, d) in sorted(merged.items()):
        rs, rd = s[1] / s[0], d[1] / d[0]
        speedup = s[0] / d[0]
        wins += speedup > 1.005
        losses += speedup < 0.995
        print(f"| {op} | {dt} | 2^{int(round(math.log2(n)))} | {s[0]:.1f} | {rs:.3f} | {d[0]:.1f} | {rd:.3f} "
              f"| {s[1]:.1f} / {d[1]:.1f} | {speedup:.3f} |")
    print(f"\ndynamic faster by more than 0.5% in {wins} rows, slower by more than 0.5% in {losses}, "
          f"of {len(merged)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
