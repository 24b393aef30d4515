#!/usr/bin/env python3
"""Prints the README's ratio tables (graph / stream / per call) from the benchmark reports (the
markdown or the JSON form), and the accuracy/stats table (% of the fast sum's bandwidth).

    python3 scripts/readme_tables.py docs/data/bench-core-h100.md docs/data/bench-numerics-h100.json
"""
import json
import sys

CORE = ["sum f32", "sum f64", "sum i32", "min f32", "max f32"]
NUMERICS = ["argmin f32", "argmax f32", "dot f32", "dot f64", "sum f16", "sum bf16"]


def read_json(path):
    tables, accuracy = {}, {}
    for t in json.load(open(path))["tables"]:
        title = t["title"].split(" — ")[0].strip()
        for r in t["rows"]:
            if r.get("cache", "warm") != "warm":
                continue
            if "graph_ratio" in r:
                tables.setdefault(title, {})[r["n"]] = \
                    f"{r['graph_ratio']:.2f} / {r['stream_ratio']:.2f} / {r['per_call_ratio']:.2f}"
            for key, name in (("pct_comp_of_fast", "compensated"), ("pct_exact_of_fast", "exact"),
                              ("pct_stats_of_sum", "stats")):
                if key in r:
                    accuracy.setdefault(f"{name} {r['dtype']}", {})[r["n"]] = f"{r[key]:.1f}"
    return tables, accuracy


def read(path):
    if path.endswith(".json"):
        return read_json(path)[0]
    tables, title, seen = {}, None, set()
    for line in open(path):
        if line.startswith("### "):
            title = line[4:].split(" — ")[0].strip()
            if title in seen:  # a later table of the same name within one report is not ours
                title = None
                continue
            seen.add(title)
            tables[title] = {}
        elif line.startswith("| 2^") and title:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if c[1] == "warm":  # n, L2, call x3, stream x3, graph x3, ...
                tables[title][c[0]] = f"{c[10]} / {c[7]} / {c[4]}"
    return tables


def table(tables, names):
    sizes = sorted({n for t in names for n in tables.get(t, {})}, key=lambda s: int(s[2:]))
    out = ["| n | " + " | ".join(names) + " |", "|---:|" + ":---:|" * len(names)]
    for n in sizes:
        out.append(f"| {n} | " + " | ".join(tables.get(t, {}).get(n, "") for t in names) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    tabs = {}
    for p in sys.argv[1:]:  # the first report that has a title keeps it ("sum f32" is also an accuracy table)
        for title, rows in read(p).items():
            tabs.setdefault(title, rows)
    print(table(tabs, CORE))
    print()
    print(table(tabs, NUMERICS))
    for p in sys.argv[1:]:
        if p.endswith(".json"):
            acc = read_json(p)[1]
            if acc:
                print()
                print("| " + p + " | 2^26 / 2^28 / 2^30 |\n|---|---|")
                for name, cells in acc.items():
                    print(f"| {name} | " + " / ".join(cells.get(n, "-") for n in ("2^26", "2^28", "2^30")) + " |")
