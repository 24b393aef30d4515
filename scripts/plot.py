#!/usr/bin/env python3
"""Turns the JSON of `tally lab sweep` into PNG plots (matplotlib):

  one figure per origin group: bandwidth (GB/s) and utilisation (% of the measured read ceiling)
  against input size, one line per variant; one figure of the best variant of each origin
  against CUB and tally; one figure per parameter sweep (hip-7 unroll, CUDA tutorial block size).

usage: scripts/plot.py SWEEP.json OUTDIR
"""
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GROUP_TITLES = {
    "cuda": "CUDA tutorial: reductions 1-5 and the two steps after",
    "hip": "HIP training examples",
    "optlog": "Block-level optimisation log",
    "sycl": "SYCL lecture",
    "numba": "Numba chapter (dot product)",
    "anchor": "Anchors: CUB, single pass, tally",
}


def load(path):
    with open(path) as f:
        j = json.load(f)
    rows = [r for t in j["tables"] for r in t["rows"]]
    return j["meta"], rows


def series_points(rows):
    s = defaultdict(list)
    for r in rows:
        if "gbps" in r:
            s[r["series"]].append((r["log2n"], r["gbps"], r["pct_ceiling"]))
    return {k: sorted(v) for k, v in s.items()}


def draw(ax_bw, ax_pct, name, pts, **kw):
    x = [2 ** p[0] for p in pts]
    ax_bw.plot(x, [p[1] for p in pts], marker="o", ms=3, label=name, **kw)
    ax_pct.plot(x, [p[2] for p in pts], marker="o", ms=3, label=name, **kw)


def figure(title, meta, lines, path):
    fig, (ax_bw, ax_pct) = plt.subplots(1, 2, figsize=(14, 5.5))
    for name, pts, kw in lines:
        draw(ax_bw, ax_pct, name, pts, **kw)
    for ax, ylabel in ((ax_bw, "bandwidth (GB/s)"), (ax_pct, "% of measured read ceiling")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("input size (elements, %s)" % meta.get("dtype", "f32"))
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_bw.axhline(meta["read_ceiling_gbps"], color="grey", ls="--", lw=1)
    ax_pct.axhline(100, color="grey", ls="--", lw=1)
    ax_pct.legend(fontsize=7, loc="upper left")
    fig.suptitle("%s — %s, %s" % (title, meta["device"], meta["date"]))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote", path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    meta, rows = load(sys.argv[1])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    variant_rows = [r for r in rows if r.get("kind") == "variant"]
    param_rows = [r for r in rows if r.get("kind") == "param"]
    by_group = defaultdict(list)
    for r in variant_rows:
        by_group[r["group"]].append(r)
    best = {}
    for group, grows in by_group.items():
        pts = series_points(grows)
        figure(GROUP_TITLES.get(group, group), meta, [(k, v, {}) for k, v in pts.items()],
               os.path.join(out, "lab-%s.png" % group))
        if group != "anchor" and pts:
            # best of the origin: the highest bandwidth at the largest size every variant reached
            best[group] = max(pts.items(), key=lambda kv: max(p[1] for p in kv[1]))
    anchors = series_points(by_group.get("anchor", []))
    lines = [("%s (best of %s)" % (name, g), pts, {}) for g, (name, pts) in best.items()]
    for name, pts in anchors.items():
        if "single-pass" not in name:
            lines.append((name, pts, {"lw": 2.5, "color": "black" if "tally" in name else "red"}))
    figure("Best of each origin against CUB and tally", meta, lines, os.path.join(out, "lab-best.png"))
    by_base = defaultdict(list)
    for r in param_rows:
        by_base[r["id"]].append(r)
    hip7 = series_points(by_base.pop("hip-7", []))
    if hip7:
        figure("hip-7 two kernels with unroll: unroll factor", meta, [(k, v, {}) for k, v in hip7.items()],
               os.path.join(out, "lab-param-hip7-unroll.png"))
    cuda = [(k, v, {}) for id_, rs in sorted(by_base.items()) for k, v in series_points(rs).items()
            if id_.startswith("cuda")]
    if cuda:
        # one panel pair per block size would be crowded; one figure per CUDA kernel instead
        per_kernel = defaultdict(list)
        for name, pts, kw in cuda:
            per_kernel[name.split()[0]].append((name, pts, kw))
        for kernel, lines in per_kernel.items():
            figure("%s: block size" % kernel, meta, lines, os.path.join(out, "lab-param-%s-block.png" % kernel))


if __name__ == "__main__":
    main()
