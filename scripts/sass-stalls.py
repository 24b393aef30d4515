#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's source page.

    ncu ... -o REPORT <program>            (with --section SourceCounters; ncu samples every warp's
                                            state at a fixed interval)
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > kernel.csv
    scripts/sass-stalls.py kernel.csv [--top 12] [--md]

prints the instructions executed and the warp-state samples of the whole kernel, the share of
each stall reason (long_sb: waiting on a global or local load; wait: a fixed-latency
dependency; short_sb: shared memory or a shuffle; membar: a memory fence; ...), and the
instructions that drew the most samples, each with its own reasons. One CSV may hold several
kernels (one header line naming each): each gets its own summary.

--check TOTAL_EXECUTED TOTAL_SAMPLES TOP_INDEX (and --check-reasons long_sb=8,wait=6,...) prints
"check failed" and exits 1 unless the first kernel's totals, the index (in the listing) of its
most-sampled instruction and those reasons' samples are these (the CPU test on
tests/data/sass-sample.csv).
"""
import argparse
import csv
import sys


def kernels(path):
    """(kernel name, header, rows) for each kernel of an ncu source-page CSV. A table starts at a
    header line (one holding a "Source" column) and ends at the next "Kernel Name" or header line;
    lines that are not rows of it (ncu's ==WARNING== notes, blank or short lines) are left out."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        lines = list(csv.reader(f))
    out, name, header, rows = [], "?", None, []
    for line in lines:
        while line and line[-1] == "":  # ncu ends its "Kernel Name" lines with a comma
            line.pop()
        if not line or not any(c.strip() for c in line):
            continue
        if line[0] == "Kernel Name" or "Source" in line:
            if header is not None:
                out.append((name, header, rows))
                header, rows = None, []
            if line[0] == "Kernel Name":
                name = line[1] if len(line) > 1 else "?"
            else:
                header = line
        elif header is not None and len(line) == len(header):
            rows.append(line)
    if header is not None:
        out.append((name, header, rows))
    if not out:
        raise SystemExit(f"{path}: no ncu source-page table (a 'Source' header line) found")
    return out


def summarize(name, header, rows, top):
    col = {h: i for i, h in enumerate(header)}
    for need in ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)"):
        if need not in col:
            raise SystemExit(f"column '{need}' missing: export with --page source --csv --print-source sass")
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]

    def num(r, h):
        v = r[col[h]].replace(",", "").strip()
        try:
            return int(float(v))
        except ValueError:  # "", "-", "n/a"
            return 0

    executed = sum(num(r, "Instructions Executed") for r in rows)
    samples = sum(num(r, "Warp Stall Sampling (All Samples)") for r in rows)
    by_reason = {h[len("stall_"):]: sum(num(r, h) for r in rows) for h in reasons}
    reason_total = sum(by_reason.values()) or 1
    ranked = sorted(range(len(rows)), key=lambda k: -num(rows[k], "Warp Stall Sampling (All Samples)"))
    order = ranked[:top]
    return {
        "most": ranked[0] if ranked else -1,
        "by_reason": by_reason,
        "name": name,
        "instructions": len(rows),
        "executed": executed,
        "samples": samples,
        "reasons": sorted(((r, n, 100.0 * n / reason_total) for r, n in by_reason.items() if n), key=lambda t: -t[1]),
        "top": [
            (k, rows[k][col["Source"]].strip(), num(rows[k], "Instructions Executed"),
             num(rows[k], "Warp Stall Sampling (All Samples)"),
             ", ".join(f"{h[len('stall_'):]} {num(rows[k], h)}" for h in reasons if num(rows[k], h) > 0))
            for k in sorted(order)
        ],
    }


def render(s, md):
    out = []
    if md:
        out.append(f"#### {s['name']}\n")
        out.append(f"{s['instructions']} SASS instructions; {s['executed']:,} warp instructions executed; "
                   f"{s['samples']:,} warp-state samples.\n")
        out.append("| stall reason | samples | share |\n|---|---:|---:|")
        out += [f"| {r} | {n:,} | {p:.1f}% |" for r, n, p in s["reasons"]]
        out.append("\n| # | instruction | executed | samples | share | reasons |\n|---:|---|---:|---:|---:|---|")
        for k, src, ex, sm, why in s["top"]:
            share = 100.0 * sm / (s["samples"] or 1)
            cell = src.replace("|", "\\|")  # SASS operands such as |R3| (absolute values)
            out.append(f"| {k} | `{cell}` | {ex:,} | {sm:,} | {share:.1f}% | {why} |")
        out.append("")
    else:
        out.append(f"{s['name']}")
        out.append(f"  {s['instructions']} instructions, {s['executed']:,} executed, {s['samples']:,} samples")
        out.append("  " + ", ".join(f"{r} {p:.1f}%" for r, n, p in s["reasons"]))
        for k, src, ex, sm, why in s["top"]:
            out.append(f"  {k:5d} {ex:12,d} {sm:7d} {100.0 * sm / (s['samples'] or 1):5.1f}%  {src[:60]:60s} {why}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=12, help="instructions listed (most samples first; default 12)")
    ap.add_argument("--md", action="store_true", help="Markdown tables")
    ap.add_argument("--check", nargs=3, type=int, metavar=("EXECUTED", "SAMPLES", "TOP_INDEX"))
    ap.add_argument("--check-reasons", default="", help="with --check: REASON=SAMPLES,... of the first kernel")
    a = ap.parse_args()
    sums = [summarize(n, h, r, a.top) for n, h, r in kernels(a.csv)]
    for s in sums:
        print(render(s, a.md))
    if a.check:
        s = sums[0]
        got, want = [s["executed"], s["samples"], s["most"]], list(a.check)
        for item in filter(None, a.check_reasons.split(",")):
            reason, n = item.split("=")
            got.append(s["by_reason"].get(reason, 0))
            want.append(int(n))
        if got != want:
            print(f"check failed: executed, samples, most-sampled index, reasons {got}, expected {want}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
