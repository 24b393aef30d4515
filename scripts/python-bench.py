#!/usr/bin/env python3
"""tally from Python against torch and cupy, side by side in one process (issue 12):
tally.sum(x) called in a loop with results left on the device vs x.sum() (torch) and cupy.sum(x),
sizes 2^10..2^30; the Python layer's cost over the C++ call (tally::reduce called in a C++ loop in
this process, into a preallocated result, with the options tally.sum uses for a torch tensor); row
and column sums against torch's; ragged segments against torch.segment_reduce (--tables picks
tables). Times are CUDA events around a loop of calls (host launch cost
included), median of 5 loops, the best of 4 such medians taken alternately, after a second of
warm-up calls. Last, the Python layer piece by piece: host time per call of each step of
tally.sum(t) at 2^10 (time.perf_counter_ns around loops of calls).

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


def python_steps(t, raw_stream, plan):
    """tally.sum(t)'s per-call path as it was written in Python before python/src/torch_path.cpp
    (84804ff): the same torch accessors and native call, interpreted (for the table below)."""
    if type(t) is torch.Tensor and t.is_cuda and t.is_contiguous():
        d = t.get_device()
        s = raw_stream(d)
        buf = tally._tally.reduce_new(t.data_ptr(), t.numel(), plan[0], plan[1], plan[2], plan[3], s, d, plan[4], False)
        r = tally._new_result(plan[5])
        r._buffer, r._stream, r._keep = buf, s, t
        return r


def host_ns(fn, calls=20000, reps=5):
    """Host ns per call of fn: the best of `reps` loops (the GPU drained before each)."""
    best = float("inf")
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    torch.cuda.synchronize()
    return best


def layer_pieces():
    """Where tally.sum(t)'s time over the C++ call goes, at 2^10 f32 (host time per call)."""
    t = torch.rand(1 << 10, device="cuda")
    x = tally._tally
    raw = torch._C._cuda_getCurrentRawStream
    d, s, n, p = t.get_device(), raw(0), t.numel(), t.data_ptr()
    plan = tally._torch_plan(t, "sum", "propagate", "fast")
    out = tally.sum(t)
    ids = (x.dtype_id("f32"), x.op_id("sum"), 0, 0)
    op = x.op_id("sum")
    pieces = [
        ("tally.sum(t)", lambda: tally.sum(t)),
        ("the native path alone: _tally._torch_reduce(t, ...)", lambda: x._torch_reduce(t, op, "propagate", "fast")),
        ("the same steps in Python (84804ff's per-call path)", lambda: python_steps(t, raw, plan)),
        ("_tally.reduce_new(...) alone (pooled buffer, launch)", lambda: x.reduce_new(p, n, *ids, s, d, 4, False)),
        ("one C++ tally::reduce, called from Python (_reduce_loop, count 1)",
         lambda: x._reduce_loop(p, n, *ids[:2], out.address, *ids[2:], s, False, 1)),
        ("the C++ call in a C++ loop (per call)", None),
        ("torch t.sum()", lambda: t.sum()),
        ("t.is_contiguous()", lambda: t.is_contiguous()),
        ("t.get_device()", lambda: t.get_device()),
        ("t.data_ptr()", lambda: t.data_ptr()),
        ("t.numel()", lambda: t.numel()),
        ("t.dtype", lambda: t.dtype),
        ("torch._C._cuda_getCurrentRawStream(d)", lambda: raw(d)),
        ("an empty Python call (lambda: None)", lambda: None),
    ]
    # Which path tally.sum(t) takes: the general one and the plan's check counted over 1000 calls.
    with tally._path_counts() as counts:
        for _ in range(1000):
            tally.sum(t)
    print(f"\nOf 1000 calls of tally.sum(t), {counts['general']} took the general path and {counts['plan']} "
          f"checked a plan; the native path answers {type(x._torch_reduce(t, op, 'propagate', 'fast')).__name__}.")
    # The pieces alternate three times, each keeping its best (the host's drift hits all alike).
    res = {name: float("inf") for name, _ in pieces}
    for _ in range(3):
        for name, fn in pieces:
            if fn is None:
                calls = 20000
                ns = host_ns(lambda: x._reduce_loop(p, n, *ids[:2], out.address, *ids[2:], s, False, calls), calls=1,
                             reps=2) / calls
            else:
                ns = host_ns(fn, reps=2)
            res[name] = min(res[name], ns)
    print("\n| step, 2^10 f32 (host time per call, best of 6 loops of 20000, three rounds alternating) | ns |")
    print("|---|---|")
    for name, ns in res.items():
        print(f"| {name} | {ns:.0f} |")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--max-log2", type=int, default=30)
    ap.add_argument("--tables", default="sums,shapes,segments,layer",
                    help="which tables, comma-separated: sums, shapes (rows and columns), segments, layer")
    args = ap.parse_args()
    tables = set(args.tables.split(","))
    unknown = tables - {"sums", "shapes", "segments", "layer"}
    if unknown:
        ap.error(f"--tables: unknown {', '.join(sorted(unknown))} (sums, shapes, segments, layer)")
    assert torch is not None and torch.cuda.is_available(), "needs torch with CUDA"
    rows = []
    warm_up()
    print(f"# tally from Python, {torch.cuda.get_device_name()} ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)\n")
    if "sums" in tables:
        sums(args, rows)
    if "shapes" in tables:
        shapes(rows)
    if "segments" in tables:
        segments(rows)
    pieces = layer_pieces() if "layer" in tables else {}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "layer_ns": pieces}, f, indent=2)


def sums(args, rows):
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


def shapes(rows):
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


def pareto_offsets(n, segments, gen):
    """CSR offsets (int64, on the GPU) of `segments` heavy-tailed segments over n elements, a fifth
    empty: the ragged table's lengths (tally bench segmented)."""
    lengths = torch.empty(segments, dtype=torch.float64).exponential_(generator=gen).mul_(1 / 1.2).exp_().sub_(1)
    lengths[torch.rand(segments, generator=gen) < 0.2] = 0
    cut = torch.cat([torch.zeros(1, dtype=torch.float64), lengths.cumsum(0)])
    return (cut * (n / cut[-1])).round().clamp_(max=n).to(torch.int64).cuda()


def segments(rows):
    """tally.reduce_segments vs torch.segment_reduce on the same CSR offsets (both unchecked:
    unsafe=True, so neither waits for its offsets' check), f32, results left on the GPU."""
    print("\n| total | segments | op | torch.segment_reduce us | tally.reduce_segments us | ratio | same results |")
    print("|---|---|---|---|---|---|---|")
    gen = torch.Generator().manual_seed(7)
    for k, segs in ((20, 8), (20, 14), (24, 12), (24, 18)):
        n = 1 << k
        t = torch.rand(n, device="cuda") * 2 - 1
        off = pareto_offsets(n, 1 << segs, gen)
        calls = 20 if k >= 24 else 200
        for op in ("sum", "max"):
            tr = xr = float("inf")
            for _ in range(3):
                tr = min(tr, loop_us(lambda: torch.segment_reduce(t, op, offsets=off, unsafe=True), calls))
                xr = min(xr, loop_us(lambda: tally.reduce_segments(t, off, op, unsafe=True), calls))
            want = torch.segment_reduce(t, op, offsets=off, unsafe=True)
            got = torch.from_dlpack(tally.reduce_segments(t, off, op))
            full = off[1:] > off[:-1]  # empty segments: torch gives its own fill, tally the identity
            same = bool(torch.allclose(got[full].double(), want[full].double(), rtol=1e-4, atol=1e-4))
            rows.append({"total": n, "segments": 1 << segs, "op": op, "torch_segment_reduce_us": tr,
                         "tally_reduce_segments_us": xr, "same": same})
            print(f"| 2^{k} | 2^{segs} | {op} | {tr:.1f} | {xr:.1f} | {tr / xr:.2f} | {'yes' if same else 'NO'} |")
        del t, off


if __name__ == "__main__":
    main()
