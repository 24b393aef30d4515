#!/usr/bin/env python3
"""torch and cupy on the shapes of `tally bench segmented` (f32 sums of rows and columns), on the
GPU machine: per call in a loop (events around 50 calls) and, for torch, CUDA-graph replay.

    python3 scripts/seg_compare.py [--totals 20,24,28] [--md out.md]
"""
import argparse
import sys
import time


def time_loop(fn, sync, event_pair, reps=50):
    for _ in range(5):
        fn()
    sync()
    start, stop = event_pair()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / reps


class CupyEvent:
    """A cupy event with torch's record / synchronize / elapsed_time interface."""

    def __init__(self):
        import cupy
        self.cupy = cupy
        self.e = cupy.cuda.Event()

    def record(self):
        self.e.record()

    def synchronize(self):
        self.e.synchronize()

    def elapsed_time(self, stop):
        return self.cupy.cuda.get_elapsed_time(self.e, stop.e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--totals", default="20,24,28")
    ap.add_argument("--md", default=None)
    args = ap.parse_args()
    totals = [int(t) for t in args.totals.split(",")]
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import cupy
    except ImportError:
        cupy = None
    lines = ["| total | rows x cols | torch rows us | torch rows graph us | torch cols us | torch cols graph us | cupy rows us | cupy cols us |",
             "|---|---|---|---|---|---|---|---|"]
    for lt in totals:
        total = 1 << lt
        for lc in (4, 8, 12, 16, 20, 24):
            cols = 1 << lc
            if cols > total:
                continue
            rows = total // cols
            row = [f"2^{lt}", f"2^{lt - lc} x 2^{lc}"]
            if torch is not None:
                x = torch.rand(rows, cols, device="cuda", dtype=torch.float32)
                ev = lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for dim in (1, 0):
                    loop = time_loop(lambda: x.sum(dim=dim), torch.cuda.synchronize, ev)
                    s = torch.cuda.Stream()
                    with torch.cuda.stream(s):
                        x.sum(dim=dim)
                    torch.cuda.synchronize()
                    g = torch.cuda.CUDAGraph()
                    calls = 20
                    with torch.cuda.graph(g):
                        for _ in range(calls):
                            x.sum(dim=dim)
                    graph = time_loop(g.replay, torch.cuda.synchronize, ev, reps=10) / calls
                    row += [f"{loop:.2f}", f"{graph:.2f}"]
                del x
                torch.cuda.empty_cache()
            else:
                row += ["", "", "", ""]
            if cupy is not None:
                y = cupy.random.random((rows, cols), dtype=cupy.float32)
                ev = lambda: (CupyEvent(), CupyEvent())
                sync = cupy.cuda.Device().synchronize

                def cupy_time(fn, reps=20):
                    return time_loop(fn, sync, ev, reps)

                row += [f"{cupy_time(lambda: y.sum(axis=1)):.2f}", f"{cupy_time(lambda: y.sum(axis=0), reps=5):.2f}"]
                del y
                cupy.get_default_memory_pool().free_all_blocks()
            else:
                row += ["", ""]
            lines.append("| " + " | ".join(row) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    header = f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
    if torch is not None:
        header += f"- device: {torch.cuda.get_device_name()}\n- torch {torch.__version__}\n"
    if cupy is not None:
        header += f"- cupy {cupy.__version__}\n"
    out = header + "\n" + text
    if args.md:
        open(args.md, "w").write(out)
    print(out)


if __name__ == "__main__":
    main()
