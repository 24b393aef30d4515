#!/usr/bin/env python3
"""tally from Python against torch and cupy, side by side in one process (issue 12):
tally.sum(x) called in a loop with results left on the device vs x.sum() (torch) and cupy.sum(x),
sizes 2^10..2^30; the Python layer's cost over the C++ call (tally::reduce called in a C++ loop in
this process, into a preallocated result, with the options tally.sum uses for a torch tensor); row
and column sums against torch's. Times are CUDA events around a loop of calls (host launch cost
included), median of 5 loops, the best of 4 such medians taken alternately, after a second of
warm-up calls.

    PYTHONPATH=build/dev/python python3 scripts/python-bench.py [--json out.json] [--max-log2 30]
"""
import argparse
import datetime
import json
import statistics
import time

import importlib
import importlib.util

import tally


def optional(name):
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


torch, cupy = optional("torch"), optional("cupy")


def loop_us(fn, calls, reps=5, inner=1):
    """us per call: CUDA events around `calls` calls of fn (each making `inner` calls)."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000 / (calls * inner))
    return statistics.median(times)


def warm_up(seconds=1.0):
    """Every path of the first row, and the GPU's clocks, busy for a second before anything is
    timed: without it the first row (2^10) came out slower than the next in all three columns
    (H200 2026-11-27 13:58 UTC: the C++ call 4.52 us at 2^10, 3.53 at 2^12; torch 11.71 and 8.59)."""
    t = torch.rand(1 << 10, device="cuda")
    c = cupy.asarray(t) if cupy is not None else None
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(200):
            t.sum(), tally.sum(t)
            if c is not None:
                cupy.sum(c), tally.sum(c)
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--max-log2", type=int, default=30)
    args = ap.parse_args()
    assert torch is not None and torch.cuda.is_available(), "needs torch with CUDA"
    rows = []
    warm_up()
    print(f"# tally from Python, {torch.cuda.get_device_name()} ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)\n")
    print("| n | torch t.sum() us | tally.sum(t) us | ratio torch/tally | C++ call us | Python layer us | cupy.sum us | tally.sum(cupy) us | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in range(10, args.max_log2 + 1, 2):
        n = 1 << k
        t = torch.rand(n, device="cuda")
        calls = max(20, min(2000, (1 << 26) // n * 20))
        out = tally.sum(t)  # a result buffer for the C++ loop
        stream = torch.cuda.current_stream().cuda_stream
        ids = (tally._tally.dtype_id("f32"), tally._tally.op_id("sum"), 0, 0)
        # The three alternate, four times, and each keeps its best median (drift and the host's
        # hiccups hit all alike; the Python layer is the difference of two best medians).
        ut = ux = un = float("inf")
        for _ in range(4):
            ut = min(ut, loop_us(lambda: t.sum(), calls))
            ux = min(ux, loop_us(lambda: tally.sum(t), calls))
            un = min(un, loop_us(lambda: tally._tally._reduce_loop(t.data_ptr(), n, *ids[:2], out.address, *ids[2:],
                                                                  stream, False, calls), 1, inner=calls))
        row = {"n": n, "torch_us": ut, "tally_us": ux, "cxx_us": un, "python_layer_us": ux - un}
        cu = cx = float("nan")
        if cupy is not None:
            c = cupy.asarray(t)
            cu = loop_us(lambda: cupy.sum(c), calls)
            cx = loop_us(lambda: tally.sum(c), calls)
            row.update(cupy_us=cu, tally_cupy_us=cx)
        rows.append(row)
        print(f"| 2^{k} | {ut:.2f} | {ux:.2f} | {ut / ux:.2f} | {un:.2f} | {ux - un:.2f} | {cu:.2f} | {cx:.2f} | {cu / cx:.2f} |")
        del t
    print("\n| shape | torch rows us | tally rows us | ratio | torch cols us | tally cols us | ratio |")
    print("|---|---|---|---|---|---|---|")
    shapes = [(1 << 20, 16), (1 << 16, 256), (1 << 12, 4096), (1 << 8, 65536), (16, 1 << 20)]
    for r, c in shapes:
        m = torch.rand(r, c, device="cuda")
        calls = 20
        # torch and tally alternate three times, each keeping its best median, as above (one median
        # alone once read 145 us for a 26 us column sum: H100 2026-11-27 16:45 UTC).
        tr = xr = tc = xc = float("inf")
        for _ in range(3):
            tr, xr = min(tr, loop_us(lambda: m.sum(dim=1), calls)), min(xr, loop_us(lambda: tally.sum(m, axis=1), calls))
            tc, xc = min(tc, loop_us(lambda: m.sum(dim=0), calls)), min(xc, loop_us(lambda: tally.sum(m, axis=0), calls))
        rows.append({"shape": [r, c], "torch_rows_us": tr, "tally_rows_us": xr, "torch_cols_us": tc, "tally_cols_us": xc})
        print(f"| {r} x {c} | {tr:.1f} | {xr:.1f} | {tr / xr:.2f} | {tc:.1f} | {xc:.1f} | {tc / xc:.2f} |")
        del m
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
