#!/usr/bin/env python3
"""Files through `tally reduce` end to end (issue 11): a 2^31-element f32 .npy in the page cache,
timed as a whole command (CUDA start-up included) and checked against its exact sum; and a sparse
raw f32 file of 100 GiB (larger than the GPU's memory) whose few nonzero values are known, reduced
exactly with the progress line shown.

    scripts/host-file-check.py build/dev/tally /tmp/work [--log2n 31] [--sparse-gib 100]
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np


def run(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, p


def pread_rate(path, threads, piece=8 << 20):
    """GB/s of `threads` threads reading all of path with os.preadv into buffers of their own
    (each thread takes every threads-th piece, as tally's staging workers do)."""
    import threading
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        def work(k):
            buf = bytearray(piece)
            view = memoryview(buf)
            for at in range(k * piece, size, threads * piece):
                os.preadv(fd, [view[:min(piece, size - at)]], at)
        ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return size / 1e9 / (time.perf_counter() - t0)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tally")
    ap.add_argument("work")
    ap.add_argument("--log2n", type=int, default=31)
    ap.add_argument("--sparse-gib", type=int, default=100)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ok = True

    # 1. A dense .npy of n f32 values (i % 1021) / 2: the exact sum is a formula.
    n = 1 << a.log2n
    path = os.path.join(a.work, f"dense-2^{a.log2n}.npy")
    if not os.path.exists(path) or os.path.getsize(path) != 128 + 4 * n:
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n,))
        step = 1 << 26
        for at in range(0, n, step):
            idx = np.arange(at, min(n, at + step), dtype=np.int64)
            mm[at:at + len(idx)] = (idx % 1021).astype(np.float32) * np.float32(0.5)
        mm.flush()
        del mm
    q, r = divmod(n, 1021)
    exact = q * (1020 * 1021 // 2) + r * (r - 1) // 2  # sum of i % 1021, then / 2
    want = float(np.float32(exact / 2))
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # into the page cache
    gb = 4 * n / 1e9
    # The head start (the host's cores sum the file exactly while CUDA starts, the GPU the rest;
    # src/chunked/head_start.hpp), the host threads reading the mapped file in place (the default)
    # or with pread (TALLY_HEAD_START_MAPPED=0), and the GPU-only path (TALLY_HEAD_START=0),
    # alternating. TALLY_HEAD_START_SHARE=1: the host keeps taking pieces after the GPU is ready.
    paths = [("head start, pread (host cores + GPU)", {"TALLY_HEAD_START_MAPPED": "0"}),
             ("head start, file mapped (the default)", {}),
             ("head start, pread, shared to the end", {"TALLY_HEAD_START_MAPPED": "0", "TALLY_HEAD_START_SHARE": "1"}),
             ("head start, mapped and shared", {"TALLY_HEAD_START_SHARE": "1"}),
             # 4 host threads on after the GPU is ready, the other cores left to the staging's workers
             ("head start, mapped, shared by 4 host threads",
              {"TALLY_HEAD_START_SHARE": "1", "TALLY_HEAD_START_SHARE_THREADS": "4"}),
             ("GPU only (TALLY_HEAD_START=0)", {"TALLY_HEAD_START": "0"})]
    times = {what: [] for what, _ in paths}
    for rep in range(3):
        for what, extra in paths:
            env = dict(os.environ, TALLY_DEBUG_HEAD_START="1", **extra)
            t, p = run([a.tally, "reduce", path, "--mode", "fast", "--value-only"], env)
            if p.returncode != 0:
                print(p.stderr)
                return 1
            got = float(np.float32(p.stdout.split()[0]))
            # With the head start every mode gives the exact sum; the GPU-only fast sum is close.
            head = "TALLY_HEAD_START" not in extra
            good = got == want if head else abs(got - exact / 2) <= 1e-5 * exact / 2
            print(f"  {what}: {t:.3f} s {'ok' if good else f'MISMATCH {got!r} want {want!r}'} {p.stderr.strip()}")
            ok &= good
            times[what].append(t)
    # The host alone (TALLY_HEAD_START_MIN_MIB past the file: the GPU takes nothing), both ways of
    # reading: the host's exact-sum rate on this machine.
    for extra in ({"TALLY_HEAD_START_MAPPED": "0"}, {}):
        env = dict(os.environ, TALLY_DEBUG_HEAD_START="1", TALLY_HEAD_START_MIN_MIB=str(1 << 20), **extra)
        t, p = run([a.tally, "reduce", path, "--value-only"], env)
        good = p.returncode == 0 and float(np.float32(p.stdout.split()[0])) == want
        ok &= good
        print(f"  host only{', pread' if extra else ', mapped'}: {t:.3f} s {'ok' if good else 'MISMATCH'} {p.stderr.strip()}")
    t, p = run([a.tally, "reduce", path, "--mode", "exact", "--value-only"])
    got = float(np.float32(p.stdout.split()[0])) if p.returncode == 0 else float("nan")
    same = got == want
    ok &= same
    print(f"dense 2^{a.log2n} f32 exact: {got!r} want {want!r} {'ok' if same else 'MISMATCH'} "
          f"({t:.2f} s, {gb / t:.1f} GB/s)")
    for what, _ in paths:
        b = min(times[what])
        print(f"dense 2^{a.log2n} f32 fast, {what}, whole command from the page cache: best {b:.3f} s of "
              f"{len(times[what])} = {gb / b:.1f} GB/s end to end (median {sorted(times[what])[len(times[what]) // 2]:.3f} s)")
    best = min(times["GPU only (TALLY_HEAD_START=0)"])
    # Where the time goes: the command's fixed cost (process, CUDA start-up and exit) on a file of
    # one element, and how fast threads read this file from the page cache with pread (no GPU).
    tiny = os.path.join(a.work, "one.npy")
    np.save(tiny, np.ones(1, np.float32))
    fixed = min(run([a.tally, "reduce", tiny, "--value-only"], dict(os.environ, TALLY_HEAD_START="0"))[0] for _ in range(3))
    print(f"  fixed cost of the command (a 1-element file): {fixed:.3f} s; the rest of the GPU-only best run: "
          f"{best - fixed:.3f} s = {gb / (best - fixed):.1f} GB/s")
    for threads in (1, 4, 8, 12, 16):
        print(f"  pread from the page cache, {threads:2d} threads x 8 MiB reads: {pread_rate(path, threads):.1f} GB/s")
    os.remove(path)

    # 2. A sparse raw file larger than the GPU's memory: holes read as zeros.
    if a.sparse_gib > 0:
        sp = os.path.join(a.work, f"sparse-{a.sparse_gib}GiB.f32")
        size = a.sparse_gib << 30
        with open(sp, "wb") as f:
            f.truncate(size)
            for off, v in [(0, 1.5), (size // 2, 2.25), (size - 4, -0.5), (12345 * 4, 1e-3)]:
                f.seek(off)
                f.write(np.float32(v).tobytes())
        want = float(np.float32(np.float64(1.5) + 2.25 - 0.5 + float(np.float32(1e-3))))
        t, p = run([a.tally, "reduce", sp, "--dtype", "f32", "--mode", "exact", "--value-only"])
        os.remove(sp)
        if p.returncode != 0:
            print(p.stderr)
            return 1
        got = float(np.float32(p.stdout.split()[0]))  # tally prints the shortest text of the f32
        lines = [l for l in p.stderr.replace("\r", "\n").splitlines() if "GiB" in l]
        same = got == want
        ok &= same
        print(f"sparse {a.sparse_gib} GiB f32 exact: {got!r} want {want!r} {'ok' if same else 'MISMATCH'} "
              f"({t:.1f} s, {size / 1e9 / t:.1f} GB/s); progress lines: {len(lines)}, last: {lines[-1] if lines else '-'}")
        ok &= len(lines) > 0
    print("host files: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
