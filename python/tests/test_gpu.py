"""The Python package on a GPU, against numpy: torch, cupy, numba, JAX and numpy inputs, every op
family, axes, dot, stats, results through DLPack and the CUDA array interface, streams, and the
README's Python example as written."""
import math
import os
import re

import numpy as np
import pytest

import tally

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
try:
    import cupy
except ImportError:  # pragma: no cover
    cupy = None
try:
    from numba import cuda as numba_cuda
except ImportError:  # pragma: no cover
    numba_cuda = None
try:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX: take GPU memory as needed
    import jax
    jax.config.update("jax_enable_x64", True)  # 64-bit dtypes stay 64-bit
    JAX_GPU = [d for d in jax.devices() if d.platform == "gpu"]
except Exception:  # pragma: no cover  (no jax, or no GPU backend for it)
    jax, JAX_GPU = None, []

RNG = np.random.default_rng(20261123)
DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]


def host_data(dt, n):
    if np.issubdtype(dt, np.floating):
        return RNG.uniform(-1, 1, n).astype(dt)
    info = np.iinfo(dt)
    return RNG.integers(max(info.min, -1000), min(info.max, 1000), n, dtype=dt, endpoint=True)


def makers():
    out = [("numpy", lambda a: a)]
    if torch is not None and torch.cuda.is_available():
        out.append(("torch", lambda a: torch.from_numpy(a).cuda()))
    if cupy is not None:
        out.append(("cupy", lambda a: cupy.asarray(a)))
    if numba_cuda is not None and numba_cuda.is_available():
        out.append(("numba", lambda a: numba_cuda.to_device(a)))
    if JAX_GPU:
        out.append(("jax", lambda a: jax.device_put(a, JAX_GPU[0])))
    return out


def value(r):
    return r.item() if isinstance(r, tally.Result) else r


def reference(a, op):
    if op == "sum":
        return a.astype(np.float64).sum() if a.dtype.kind == "f" else int(a.astype(np.int64 if a.dtype.kind == "i" else np.uint64).sum())
    if op == "argmax":
        return int(np.argmax(a))
    if op == "argmin":
        return int(np.argmin(a))
    if op == "mean":
        return float(a.astype(np.float64).mean())
    return getattr(np, op)(a)


@pytest.mark.parametrize("name,make", makers())
@pytest.mark.parametrize("dt", DTYPES)
def test_whole_array_ops_match_numpy(name, make, dt):
    a = host_data(dt, 100_003)
    x = make(a)
    for op in ("sum", "min", "max", "argmin", "argmax", "mean"):
        got, want = value(tally.reduce(x, op)), reference(a, op)
        if a.dtype.kind == "f" and op in ("sum", "mean"):
            assert math.isclose(got, want, rel_tol=2e-3 if dt == np.float16 else 1e-5, abs_tol=1e-3), (name, op)
        else:
            assert got == want, (name, dt, op, got, want)


@pytest.mark.parametrize("name,make", makers())
def test_axes_match_numpy(name, make):
    a = RNG.uniform(-1, 1, (6, 33, 65)).astype(np.float32)
    x = make(a)
    for axis in (0, 1, 2, -1, (1, 2), (0, 1)):
        got = tally.sum(x, axis=axis)
        got = got.numpy() if isinstance(got, tally.Result) else got
        np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=axis), rtol=1e-5, atol=1e-5)
        gmax = tally.max(x, axis=axis)
        np.testing.assert_array_equal(gmax.numpy() if isinstance(gmax, tally.Result) else gmax, a.max(axis=axis))
    am = tally.argmax(x, axis=1)
    np.testing.assert_array_equal(am.numpy() if isinstance(am, tally.Result) else am, np.argmax(a, axis=1))


def test_exact_mode_and_dot_stats():
    a = RNG.uniform(-1, 1, 1_000_001).astype(np.float32)
    b = RNG.uniform(-1, 1, 1_000_001).astype(np.float32)
    from fractions import Fraction
    exact = float(np.float32(float(sum(Fraction(float(v)) for v in a[:20000]))))
    assert tally.sum_value(a[:20000].copy(), mode="exact") == exact
    for name, make in makers():
        x, y = make(a), make(b)
        assert math.isclose(value(tally.dot(x, y)), float(np.dot(a.astype(np.float64), b)), rel_tol=1e-4), name
        st = tally.stats(x, ddof=1)
        assert st["count"] == a.size
        assert math.isclose(st["mean"], float(a.astype(np.float64).mean()), rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(st["variance"], float(a.astype(np.float64).var(ddof=1)), rel_tol=1e-9)


@pytest.mark.skipif(torch is None or not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs torch and two GPUs")
def test_arrays_on_a_gpu_that_is_not_current():
    """Every call runs on its input's GPU (GPU 1 here, GPU 0 current), leaves its results there and
    GPU 0 current: sum, reduce_value, dot, stats and stats along an axis."""
    a = RNG.uniform(-1, 1, 100_003).astype(np.float32)
    b = RNG.uniform(-1, 1, 100_003).astype(np.float32)
    torch.cuda.set_device(0)
    x, y = torch.from_numpy(a).to("cuda:1"), torch.from_numpy(b).to("cuda:1")
    r = tally.sum(x)
    assert torch.from_dlpack(r).device == torch.device("cuda:1")
    assert math.isclose(float(r), float(a.astype(np.float64).sum()), rel_tol=1e-5, abs_tol=1e-3)
    assert tally.reduce_value(x, "max") == float(a.max())
    d = tally.dot(x, y)
    assert torch.from_dlpack(d).device == torch.device("cuda:1")
    assert math.isclose(float(d), float(np.dot(a.astype(np.float64), b)), rel_tol=1e-4, abs_tol=1e-3)
    mixed = tally.dot(b, x)  # a host vector and one on GPU 1: a number, computed there
    assert math.isclose(mixed, float(np.dot(a.astype(np.float64), b)), rel_tol=1e-4, abs_tol=1e-3)
    st = tally.stats(x, ddof=1)
    assert st["count"] == a.size and st["max"] == float(a.max())
    assert math.isclose(st["variance"], float(a.astype(np.float64).var(ddof=1)), rel_tol=1e-9)
    m = a[:100_000].reshape(100, 1000)
    rows = tally.stats(x[:100_000].reshape(100, 1000), axis=1)
    np.testing.assert_allclose(rows["mean"], m.astype(np.float64).mean(axis=1), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(rows["min"], m.min(axis=1).astype(np.float64))
    with pytest.raises(ValueError, match="GPU 1 and y on GPU 0"):
        tally.dot(x, torch.from_numpy(b).to("cuda:0"))
    assert torch.cuda.current_device() == 0


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA")
def test_results_go_to_torch_and_cupy_without_copies():
    t = torch.arange(1000, dtype=torch.float32, device="cuda")
    r = tally.sum(t)
    assert float(r) == 499500.0
    back = torch.from_dlpack(r)
    assert back.device.type == "cuda" and back.item() == 499500.0 and back.data_ptr() == r.address
    rows = tally.max(t.reshape(10, 100), axis=1)
    assert torch.equal(torch.from_dlpack(rows), t.reshape(10, 100).max(dim=1).values)
    idx = tally.argmax(t.reshape(10, 100), axis=1)
    assert torch.equal(torch.from_dlpack(idx).cpu(), torch.full((10,), 99, dtype=torch.int64))
    bf = torch.ones(4096, dtype=torch.bfloat16, device="cuda")
    assert float(tally.sum(bf)) == 4096.0
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        u = torch.ones(1 << 20, device="cuda")
        assert float(tally.sum(u, stream=s)) == float(1 << 20)
    if cupy is not None:
        assert float(cupy.from_dlpack(r)) == 499500.0


def test_errors_on_the_gpu_keep_the_process_usable():
    if torch is None or not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    t = torch.ones(100, device="cuda")
    with pytest.raises(ValueError):
        tally.sum(t[::2])
    with pytest.raises(ValueError):
        tally.sum(t, mode="exact", nan="ignore")
    assert float(tally.sum(t)) == 100.0


def test_host_arrays_along_axes_give_numpy_arrays():
    a = RNG.uniform(-1, 1, (5, 7, 9)).astype(np.float64)
    got = tally.sum(a, axis=1)
    assert isinstance(got, np.ndarray) and got.shape == (5, 9)
    np.testing.assert_allclose(got, a.sum(axis=1), rtol=1e-12)
    st = tally.stats(a, axis=-1)
    np.testing.assert_allclose(np.asarray(st["mean"]), a.mean(axis=-1), rtol=1e-12)


@pytest.mark.skipif(cupy is None, reason="needs cupy")
def test_streams_given_by_object_outlive_the_call_and_out_stays_on_its_stream():
    x = cupy.arange(1000, dtype=cupy.float32)
    r = tally.sum(x, stream=cupy.cuda.Stream())  # the stream object is dropped by the caller
    assert r.item() == 499500.0
    out = tally.sum(x)
    tally.sum(x * 2, out=out)
    assert out.item() == 999000.0
    with pytest.raises(ValueError, match="stream"):
        tally.sum(x, out=out, stream=cupy.cuda.Stream())


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA")
def test_empty_axes():
    e = torch.empty(0, 5, device="cuda")
    st = tally.stats(e, axis=0)
    assert st["count"] == [0] * 5
    assert tally.sum(e, axis=1).numpy().shape == (0,)
    assert tally.sum(e, axis=0).numpy().tolist() == [0.0] * 5


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA")
def test_torch_fast_path_matches_the_checked_path():
    # tally.sum(t) of a whole contiguous CUDA tensor takes the one-native-call path that trusts
    # torch's description of the memory; the general path (stream= given) checks it with the
    # driver. Both give the same bits, for every op family and several dtypes. tally._path_counts
    # counts the calls that leave the native path: the general path (tally.reduce, which the
    # checked calls below also take) and the plans' check (once per combination).
    general = tally.reduce
    with tally._path_counts() as calls:
        for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.uint8, torch.bool):
            t = (torch.rand(100_003, device="cuda") * 100).to(dt)
            s = torch.cuda.current_stream()
            for op in ("any", "all") if dt == torch.bool else ("sum", "max", "argmin", "mean"):
                # The first call in a process that has not seen torch sets the path up (the general
                # path), the first call of a combination adds its plan; after two, only the native
                # path runs, whatever ran before this test.
                getattr(tally, op)(t)
                getattr(tally, op)(t)
                before = dict(calls)
                fast = getattr(tally, op)(t)
                assert calls == before, (dt, op, calls, before)
                checked = general(t, op, stream=s)
                assert fast.tolist() == checked.tolist(), (dt, op)
                native = tally._tally._torch_reduce(t, tally._tally.op_id(op), "propagate", "fast")
                assert isinstance(native, tally.Result) and native.tolist() == fast.tolist(), (dt, op, native)
        t = torch.rand(1 << 16, device="cuda", dtype=torch.float64) - 0.5
        exact = tally.sum(t, mode="exact")  # another mode: a plan of its own
        assert tally._tally._torch_reduce(t, tally._tally.op_id("sum"), "propagate", "exact").item() == exact.item()
        assert exact.item() == general(t, "sum", mode="exact", stream=0).item()
        t[7] = float("nan")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())  # t was made on the default stream
        with torch.cuda.stream(side):  # torch's current stream is the one the native path enqueues on
            tally.max(t, nan="ignore")  # its plan
            before = dict(calls)
            r = tally.max(t, nan="ignore")
            assert calls == before and r._stream == side.cuda_stream and r._keep is t
            assert r.item() == float(np.nanmax(t.cpu().numpy()))
    with pytest.raises(TypeError, match="complex"):
        tally.sum(torch.ones(4, dtype=torch.complex64, device="cuda"))
    with pytest.raises(ValueError, match="unknown op|mode must be"):
        tally.sum(torch.ones(4, device="cuda"), mode="kahan")
    # Results stay right when the caching allocator hands the input's memory to the next tensor.
    vals = []
    for k in range(50):
        vals.append(tally.sum(torch.full((4096,), float(k), device="cuda")))
    assert [r.item() for r in vals] == [4096.0 * k for k in range(50)]


@pytest.mark.skipif(not JAX_GPU, reason="needs jax with a GPU backend")
def test_jax_arrays_are_read_in_place():
    a = RNG.uniform(-1, 1, (64, 257)).astype(np.float32)
    x = jax.device_put(a, JAX_GPU[0])
    assert math.isclose(value(tally.sum(x)), float(a.astype(np.float64).sum()), rel_tol=1e-5)
    np.testing.assert_array_equal(tally.argmax(x, axis=1).numpy(), np.argmax(a, axis=1))
    back = jax.dlpack.from_dlpack(tally.max(x, axis=0))  # results go back to JAX through DLPack
    np.testing.assert_array_equal(np.asarray(back), a.max(axis=0))
    assert tally.sum(jax.numpy.ones(1000, dtype=jax.numpy.bfloat16)).item() == 1000.0


# ---- ragged segments -------------------------------------------------------------------------------
def ragged_offsets(n, segments, rng):
    """CSR offsets of `segments` segments over n elements: heavy-tailed lengths, about a fifth
    empty, the last ending at n."""
    lengths = np.floor(rng.pareto(1.2, segments) * 8).astype(np.int64)
    lengths[rng.random(segments) < 0.2] = 0
    if lengths.sum() == 0:
        lengths[0] = 1
    cut = np.concatenate([[0], np.cumsum(lengths)])
    return np.minimum(np.round(cut * (n / cut[-1])).astype(np.int64), n)


def segment_reference(a, begins, ends, op):
    """numpy over each segment; None where the segment is empty (the op's identity there)."""
    out = []
    for b, e in zip(begins, ends):
        out.append(None if e == b else reference(a[b:e], op))
    return out


def f32_rounded(q):
    """The exact rational q rounded once to float32, to nearest with ties to even."""
    from fractions import Fraction
    f = np.float32(float(q))  # within an ulp of q (double rounding may miss by one)
    best = None
    for c in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))):
        d = abs(Fraction(float(c)) - q)
        if best is None or d < best[0] or (d == best[0] and int(c.view(np.uint32)) % 2 == 0):
            best = (d, c)
    return float(best[1])


def offsets_in(make, h):
    """The offsets as the maker's kind of array (int64), or as a list for the host."""
    return h.tolist() if make is None else make(h)


@pytest.mark.parametrize("name,make", makers())
def test_segments_match_numpy_for_every_framework(name, make):
    n = 20_011
    a = RNG.uniform(-1, 1, n).astype(np.float32)
    a[RNG.integers(0, n, 40)] = 0.5  # ties for argmin/argmax inside segments
    off = ragged_offsets(n, 301, RNG)
    x = make(a)
    for offsets in (make(off), off.tolist()):  # on the input's device (or host), and a list
        for op in ("sum", "min", "max", "argmin", "argmax", "mean"):
            r = tally.reduce_segments(x, offsets, op)
            got = r.numpy() if isinstance(r, tally.Result) else r
            assert got.shape == (301,), (name, op, got.shape)
            want = segment_reference(a, off[:-1], off[1:], op)
            empty = -1 if op in ("argmin", "argmax") else tally.reduce_value(np.empty(0, np.float32), op)
            for s, w in enumerate(want):
                if w is None:  # the op's identity, as reduce of no elements (mean: NaN)
                    assert got[s] == empty or (math.isnan(got[s]) and math.isnan(empty)), (name, op, s, got[s])
                elif op in ("sum", "mean"):  # f32 rounding: a few ulps of the sum of magnitudes
                    seg = a[off[s]:off[s + 1]].astype(np.float64)
                    tol = 4e-6 * np.abs(seg).sum() / (seg.size if op == "mean" else 1) + 1e-7
                    assert abs(float(got[s]) - w) <= tol, (name, op, s, got[s], w)
                else:
                    assert got[s] == w, (name, op, s, got[s], w)


def test_segments_as_begins_and_ends_in_any_order_with_integers_exact():
    n = 50_000
    a = RNG.integers(-2**31, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    begins = RNG.integers(0, n, 200)
    ends = np.minimum(begins + RNG.integers(0, 3000, 200), n)
    ends[::17] = begins[::17]  # empty segments
    got = tally.reduce_segments(a, begins, "sum", ends=ends)  # host input, host offsets: a NumPy array
    assert isinstance(got, np.ndarray)
    assert got.tolist() == [int(a[b:e].astype(np.int64).sum()) for b, e in zip(begins, ends)]
    if cupy is not None:
        x = cupy.asarray(a)
        r = tally.reduce_segments(x, cupy.asarray(begins), "max", ends=cupy.asarray(ends))
        empty = tally.reduce_value(np.empty(0, np.int32), "max")
        want = [int(a[b:e].max()) if e > b else empty for b, e in zip(begins, ends)]
        assert r.numpy().tolist() == want
        for op in ("bit_xor", "argmax"):
            got = tally.reduce_segments(x, begins, op, ends=ends).numpy().tolist()
            for s, (b, e) in enumerate(zip(begins, ends)):
                if e == b:
                    continue
                w = int(np.bitwise_xor.reduce(a[b:e])) if op == "bit_xor" else int(np.argmax(a[b:e]))
                assert got[s] == w, (op, s)


def test_exact_segment_sums_are_the_exact_sums_rounded_once():
    from fractions import Fraction
    n = 30_000
    a = (RNG.standard_normal(n) * np.exp2(RNG.integers(-30, 30, n))).astype(np.float32)
    off = ragged_offsets(n, 64, RNG)
    got = tally.reduce_segments(a, off, "sum", mode="exact")
    for s in range(64):
        q = sum((Fraction(float(v)) for v in a[off[s]:off[s + 1]]), Fraction(0))
        assert float(got[s]) == f32_rounded(q), (s, got[s])
        if off[s + 1] > off[s]:  # the same bits as the whole-array exact sum of that segment
            assert float(got[s]) == tally.sum_value(a[off[s]:off[s + 1]].copy(), mode="exact")


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA")
def test_segments_bad_offsets_name_the_segment_and_write_nothing():
    x = torch.arange(100, dtype=torch.float32, device="cuda")
    with pytest.raises(tally.TallyError, match=r"reduce_segments.*segment 2 \[50, 40\).*out of order"):
        tally.reduce_segments(x, torch.tensor([0, 10, 50, 40, 100], device="cuda"))
    with pytest.raises(tally.TallyError, match=r"segment 1 \[10, 101\).*past n = 100"):
        tally.reduce_segments(x, [0, 10, 101])
    with pytest.raises(tally.TallyError, match=r"segment 0 \[-1, 10\).*negative"):
        tally.stats_segments(x, [-1, 10])
    r = tally.reduce_segments(x, [0, 10, 101], unsafe=True)  # no wait: found when read
    with pytest.raises(tally.TallyError, match="segment 1"):
        r.tolist()
    with pytest.raises(TypeError, match="int64"):
        tally.reduce_segments(x, torch.tensor([0, 10], dtype=torch.int32, device="cuda"))
    ok = tally.reduce_segments(x, [0, 10, 100], unsafe=True)
    assert ok.tolist() == [45.0, 4905.0]
    assert tally.reduce_segments(x, [0]).numpy().shape == (0,)  # no segments
    out = tally.reduce_segments(x, [0, 50, 100])
    tally.reduce_segments(x * 2, [0, 1, 2], out=out)  # results into an earlier call's
    assert out.tolist() == [0.0, 2.0]
    with pytest.raises(tally.TallyError, match="segment 0"):
        tally.reduce_segments(x, [7, 3, 9], out=out)  # bad offsets: nothing written
    assert out.tolist() == [0.0, 2.0]
    tally.reduce_segments(x, [0, 3, 200], out=out, unsafe=True)  # bad, unchecked: nothing written
    assert torch.from_dlpack(out).tolist() == [0.0, 2.0]  # (an export does not check)
    with pytest.raises(tally.TallyError, match=r"segment 1 \[5, 1\)"):
        tally.reduce_segments(x, [0, 5, 1], out=out)  # a failing call keeps out's pending check
    for _ in range(2):  # every read: the results belong to no call
        with pytest.raises(tally.TallyError, match=r"segment 1 \[3, 200\)"):
            out.tolist()
    tally.reduce_segments(x, [0, 1, 2], out=out)  # a good call writes them, and the check goes
    assert out.tolist() == [0.0, 1.0]
    assert torch.equal(torch.from_dlpack(tally.reduce_segments(x, [0, 4, 4, 9], "argmax")).cpu(),
                       torch.tensor([3, -1, 4]))


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch with CUDA")
def test_segments_on_a_side_stream_with_host_offsets():
    # Host offsets are copied on the call's stream: a side stream's reduction reads them whole.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for k in range(20):
            x = torch.full((1 << 16,), float(k), device="cuda")
            r = tally.reduce_segments(x, list(range(0, (1 << 16) + 1, 1 << 12)), unsafe=True)
            assert r._stream == side.cuda_stream
            assert r.tolist() == [4096.0 * k] * 16


@pytest.mark.parametrize("name,make", makers())
def test_segment_stats_match_numpy(name, make):
    n = 12_345
    a = RNG.uniform(-3, 5, n).astype(np.float64)
    off = ragged_offsets(n, 97, RNG)
    st = tally.stats_segments(make(a), make(off), ddof=1)
    assert st["count"] == np.diff(off).tolist()
    for s in range(97):
        seg = a[off[s]:off[s + 1]]
        if seg.size == 0:
            assert math.isnan(st["variance"][s])
            continue
        assert math.isclose(st["mean"][s], seg.mean(), rel_tol=1e-12, abs_tol=1e-12), (name, s)
        assert st["min"][s] == seg.min() and st["max"][s] == seg.max()
        if seg.size > 1:
            assert math.isclose(st["variance"][s], seg.var(ddof=1), rel_tol=1e-10), (name, s)


README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


@pytest.mark.skipif(not os.path.exists(README), reason="the README is in the source tree only")
@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="the example uses torch")
def test_readme_example_runs_as_written():
    text = open(README, encoding="utf-8").read()
    section = text[text.index("## From Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md (From Python)", "exec"), {})
