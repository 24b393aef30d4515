"""The Python package without a GPU: import, dtype mapping, argument errors (clear exceptions,
never a crash)."""
import copy

import numpy as np
import pytest

import tally


def test_import_and_native_layer():
    assert tally.TallyError is tally._tally.TallyError
    assert issubclass(tally.TallyError, RuntimeError)
    assert isinstance(tally.device_count(), int)
    assert tally._tally.dtype_size("bf16") == 2
    assert tally._tally.result_dtype("i32", "sum") == "i64"
    assert tally._tally.result_dtype("f16", "max") == "f32"
    assert tally._tally.result_bytes("f32", "argmax") == 16


def test_version_is_the_headers():
    # Read include/tally/version.hpp here (the repository's copy; the package's metadata and the
    # library come from the same file) and compare with what the package says.
    import pathlib
    import re
    header = pathlib.Path(__file__).resolve().parents[2] / "include" / "tally" / "version.hpp"
    if not header.exists():
        pytest.skip("the tests run outside the repository")
    parts = [re.search(rf"^#define TALLY_VERSION_{k} (\d+)$", header.read_text(), re.M).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    assert tally.__version__ == ".".join(parts)
    assert "__version__" in tally.__all__
    from importlib import metadata
    try:
        dist = metadata.distribution("tally")
    except metadata.PackageNotFoundError:
        return  # the build tree on PYTHONPATH: no installed metadata to compare
    if pathlib.Path(dist.locate_file("tally")).resolve() == pathlib.Path(tally.__file__).resolve().parent:
        assert dist.version == tally.__version__


def test_stub_matches_the_module():
    # The type stub (__init__.pyi, with py.typed beside it) declares every public name, and each
    # function there takes the same parameters, of the same kinds and defaults, as the module's.
    import ast
    import inspect
    import pathlib
    pkg = pathlib.Path(tally.__file__).parent
    assert (pkg / "py.typed").exists()
    tree = ast.parse((pkg / "__init__.pyi").read_text())
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names = set(defs) | {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    assert set(tally.__all__) <= names, set(tally.__all__) - names
    kinds = {"posonlyargs": inspect.Parameter.POSITIONAL_ONLY, "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
             "kwonlyargs": inspect.Parameter.KEYWORD_ONLY}
    for name in tally.__all__:
        node = defs.get(name)
        if not isinstance(node, ast.FunctionDef):
            continue
        a = node.args
        declared = [(p.arg, kinds[k]) for k in kinds for p in getattr(a, k)]
        defaults = dict(zip([p.arg for p in a.posonlyargs + a.args][::-1], [ast.literal_eval(d) for d in a.defaults[::-1]]))
        defaults.update({p.arg: ast.literal_eval(d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        sig = inspect.signature(getattr(tally, name))
        actual = [(p.name, p.kind) for p in sig.parameters.values()]
        assert declared == actual, (name, declared, actual)
        for p in sig.parameters.values():
            if p.default is not inspect.Parameter.empty:
                assert defaults.get(p.name, "<none>") == p.default, (name, p.name)
            else:
                assert p.name not in defaults, (name, p.name)
    result_methods = {n.name for n in defs["Result"].body if isinstance(n, ast.FunctionDef)}
    public = {m for m in vars(tally.Result) if not m.startswith("_")} | {"__dlpack__", "__float__", "__int__"}
    assert public - {"shape"} <= result_methods, public - result_methods


@pytest.mark.parametrize("np_type,name", [
    (np.bool_, "b8"), (np.int8, "i8"), (np.uint8, "u8"), (np.int16, "i16"), (np.uint16, "u16"),
    (np.int32, "i32"), (np.uint32, "u32"), (np.int64, "i64"), (np.uint64, "u64"),
    (np.float16, "f16"), (np.float32, "f32"), (np.float64, "f64")])
def test_numpy_dtypes_map_to_tally(np_type, name):
    assert tally.tally_dtype(np.dtype(np_type).str) == name
    a = tally._as_array(np.zeros(5, dtype=np_type))
    assert (a.dtype, a.n, a.shape, a.device) == (name, 5, (5,), "cpu")


def test_bfloat16_code_and_unsupported_types():
    assert tally.tally_dtype("bf2") == "bf16"
    for bad in (np.complex64, np.float128 if hasattr(np, "float128") else np.complex128, "U3"):
        with pytest.raises(TypeError, match="does not reduce arrays of type|DLPack type code"):
            tally._as_array(np.zeros(3, dtype=bad))
    with pytest.raises(TypeError, match="big-endian"):
        tally.tally_dtype(">f4")
    with pytest.raises(TypeError, match="__dlpack__"):
        tally.sum([1.0, 2.0])


def test_non_contiguous_arrays_are_refused():
    x = np.arange(20, dtype=np.float32)
    with pytest.raises(ValueError, match="not C-contiguous"):
        tally._as_array(x[::2])
    with pytest.raises(ValueError, match="not C-contiguous"):
        tally._as_array(np.zeros((4, 5), dtype=np.float32).T)
    assert tally._as_array(np.zeros((4, 1, 5), dtype=np.float32)[:, :, :]).n == 20


def test_argument_errors_name_the_problem():
    x = np.ones(8, dtype=np.int32)
    with pytest.raises(ValueError, match="unknown op"):
        tally.reduce(x, "median")
    with pytest.raises(ValueError, match="nan must be"):
        tally.max(x, nan="skip")
    with pytest.raises(ValueError, match="mode must be"):
        tally.sum(x, mode="kahan")
    with pytest.raises(ValueError, match="accuracy modes|mode"):
        tally.sum(x, mode="exact")  # tally's own reason: modes are for floats
    with pytest.raises(ValueError, match="ignore"):
        tally.sum(np.ones(4, np.float32), nan="ignore")
    with pytest.raises(ValueError, match="bit_xor|bitwise|float"):
        tally.bit_xor(np.ones(4, np.float32))
    y = np.ones((2, 3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="out of range"):
        tally.sum(y, axis=3)
    with pytest.raises(ValueError, match="not adjacent"):
        tally.sum(y, axis=(0, 2))
    with pytest.raises(ValueError, match="repeats"):
        tally.sum(y, axis=(1, -2))
    with pytest.raises(TypeError, match="axis must be"):
        tally.sum(y, axis=1.5)
    with pytest.raises(TypeError, match="one dtype"):
        tally.dot(np.ones(3, np.float32), np.ones(3, np.float64))
    with pytest.raises(ValueError, match="elements"):
        tally.dot(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError, match="float vectors"):
        tally.dot(np.ones(3, np.int32), np.ones(3, np.int32))
    with pytest.raises(TypeError, match="stream="):
        tally.sum(x, stream="default")
    # From an audit (2026-11-28): numpy's rules for axes (integer scalars yes, bools no), out= only
    # as a Result and only for device inputs, dot of vectors, ddof a non-negative int; all refused
    # before any GPU work.
    with pytest.raises(TypeError, match="axis must be .*bool"):
        tally.sum(y, axis=True)
    with pytest.raises(TypeError, match="axis must be .*bool"):
        tally.sum(y, axis=(np.bool_(False), np.bool_(True)))
    with pytest.raises(TypeError, match="out must be a Result"):
        tally.sum(y, axis=1, out=np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="out= is for device inputs"):
        tally.sum(y, axis=1, out=tally.Result.__new__(tally.Result))
    with pytest.raises(ValueError, match="not a matrix product"):
        tally.dot(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="not a matrix product"):
        tally.dot(np.ones(6, np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="ddof -1"):
        tally.stats(np.ones(4, np.float32), ddof=-1)
    with pytest.raises(TypeError, match="ddof must be an int"):
        tally.stats(np.ones(4, np.float32), ddof=0.5)
    with pytest.raises(TypeError, match="ddof must be an int"):
        tally.stats(np.ones(4, np.float32), ddof="1")


def test_segment_arguments_are_checked_before_any_gpu_work():
    x = np.arange(10, dtype=np.float32)
    with pytest.raises(TypeError, match="offsets must hold integers"):
        tally.reduce_segments(x, np.array([0.0, 5.0]))
    with pytest.raises(TypeError, match="ends must hold integers"):
        tally.reduce_segments(x, [0, 1], ends=[True, False])
    with pytest.raises(ValueError, match="1-D"):
        tally.reduce_segments(x, np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="at least one"):
        tally.reduce_segments(x, [])
    with pytest.raises(ValueError, match="3 begins .* 2 ends"):
        tally.reduce_segments(x, [0, 1, 2], ends=[4, 5])
    with pytest.raises(ValueError, match="past int64"):
        tally.reduce_segments(x, np.array([0, 2**63], np.uint64))
    with pytest.raises(ValueError, match="unknown op"):
        tally.reduce_segments(x, [0, 10], "median")
    with pytest.raises(ValueError, match="mode must be"):
        tally.reduce_segments(x, [0, 10], mode="kahan")
    with pytest.raises(ValueError, match="out= is for device inputs"):
        tally.reduce_segments(x, [0, 10], out=tally.Result.__new__(tally.Result))
    with pytest.raises(TypeError, match="__dlpack__"):
        tally.reduce_segments(x, "0 10")
    with pytest.raises(TypeError, match="unsafe must be True or False"):
        tally.reduce_segments(x, [0, 10], unsafe="no")
    assert tally.reduce_segments(x, [0]).dtype == np.float32  # no segments: nothing on the GPU; the result dtype
    assert tally.reduce_segments(x, [4], "argmax").dtype == np.int64
    assert tally.stats_segments(x, [3])["count"] == []
    with pytest.raises(ValueError, match="ddof -2"):
        tally.stats_segments(x, [0, 10], ddof=-2)
    with pytest.raises(ValueError, match="nan must be"):
        tally.stats_segments(x, [0, 10], nan="skip")
    with pytest.raises(TypeError, match="not bool"):
        tally.stats_segments(np.ones(4, np.bool_), [0, 4])
    g = tally._Segments(x, np.array([0, 3, 3, 10], np.int32), None, None, "t")  # host ints become int64
    assert (g.segments, g.host, g.csr, g.stream, g.parts[0][1].dtype) == (3, True, True, 0, np.int64)
    own = np.array([0, 3, 10], np.int64)
    g = tally._Segments(x, own, None, None, "t")
    assert not np.shares_memory(g.parts[0][1], own)  # uploaded from a copy of the caller's offsets
    assert tally.reduce_segments(x, [1], "sum", unsafe=np.True_).shape == (0,)
    g = tally._Segments(x, range(4), [5, 6, 7, 8], None, "t")
    assert (g.segments, g.csr) == (4, False) and g.parts[1][1].tolist() == [5, 6, 7, 8]


def test_whole_array_results_read_like_any_result():
    # The per-call path's Result subclass: the fixed fields as class attributes (one class per
    # dtype and op), the rest in the base class's slots; no instance dictionary.
    cls = tally._scalar_class("i32", "argmax", tally._tally.result_dtype("i32", "argmax"))
    assert cls is tally._scalar_class("i32", "argmax", "i32")
    assert issubclass(cls, tally.Result) and cls.__name__ == "Result" and cls.__module__ == "tally"
    r = tally._new_result(cls)
    r._buffer, r._stream, r._keep = None, 7, "input"
    assert (r.shape, r._count, r._dtype, r._op, r._rtype, r._arg, r._stats, r._stream) == \
        ((), 1, "i32", "argmax", "i32", True, False, 7)
    assert r.dtype == "i64"  # argmax results export their indices
    assert repr(r) == "tally.Result(shape=(), dtype=i64, op=argmax)"
    assert not hasattr(r, "__dict__")
    with pytest.raises(AttributeError):
        r.shape = (3,)  # fixed for the class
    c = copy.copy(r)  # a shallow copy: the same buffer, the class's fields
    assert type(c) is cls and (c._buffer, c._stream, c._keep, c.shape, c._op) == (None, 7, "input", (), "argmax")
    s = tally._new_result(tally._scalar_class("f32", "stats", "f64"))
    assert s._stats and not s._arg
    with pytest.raises(TypeError, match="records"):
        s._view()


def test_axes_are_normalised_like_numpy():
    assert tally._axes(None, 3, "t") is None
    assert tally._axes(-1, 3, "t") == (2, 1)
    assert tally._axes(np.int64(1), 3, "t") == (1, 1)  # integer scalars, as numpy takes them
    assert tally._axes((np.int32(-1), np.intp(1)), 3, "t") == (1, 2)
    assert tally._axes((2, 1), 3, "t") == (1, 2)
    assert tally._axes((0, 1, 2), 3, "t") is None  # every axis: the whole array


@pytest.mark.skipif(tally.device_count() > 0, reason="checks the message given without a GPU")
def test_without_a_gpu_the_error_says_so():
    with pytest.raises(tally.TallyError, match="no CUDA GPU"):
        tally.sum(np.ones(10, np.float32))


def test_python_m_tally_runs_the_lab_catalogue():
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "tally", "lab", "list"], capture_output=True, text=True)
    if p.returncode == 2 and "not found" in p.stderr:
        pytest.skip("no tally command beside the package or on PATH")
    assert p.returncode == 0, p.stderr
    assert "cuda-1" in p.stdout and "hip-1" in p.stdout


_TORCH_PATH_SCRIPT = r'''
import sys
import tally
from tally import _tally

class Tensor:  # what the native path asks of a torch.Tensor
    def __init__(self, device, contiguous=True, dtype="float32"):
        self.device_index, self.contiguous, self.dtype = device, contiguous, dtype
        self.is_cuda = device >= 0
    def get_device(self): return self.device_index
    def is_contiguous(self): return self.contiguous
    def data_ptr(self): return 0x7000
    def numel(self): return 0  # nothing is read at 0x7000 (on a GPU: the sum of nothing)

sum_id = _tally.op_id("sum")
t = Tensor(0)
assert _tally._torch_reduce(t, sum_id, "propagate", "fast") is None  # torch not set up yet
_tally._torch_setup(Tensor, lambda d: 0)
assert _tally._torch_reduce(Tensor(-1), sum_id, "propagate", "fast") is None  # a CPU tensor
assert _tally._torch_reduce(Tensor(0, contiguous=False), sum_id, "propagate", "fast") is None
assert _tally._torch_reduce(t, sum_id, "propagate", "kahan") is None  # the general path names it
assert _tally._torch_reduce(t, sum_id, None, "fast") is None
assert _tally._torch_reduce(object(), sum_id, "propagate", "fast") is None
assert _tally._torch_reduce(t, sum_id, "propagate", "fast") is False  # no plan yet
cls = tally._scalar_class("f32", "sum", "f32")
ids = (_tally.dtype_id("f32"), sum_id, _tally.nan_id("propagate"), _tally.mode_id("exact"))
_tally._torch_plan_add("float32", *ids, 4, cls)
assert _tally._torch_reduce(t, sum_id, "propagate", "fast") is False  # another mode
assert _tally._torch_reduce(t, sum_id, "ignore", "exact") is False  # another nan policy
assert _tally._torch_reduce(t, _tally.op_id("max"), "propagate", "exact") is False  # another op
try:
    _tally._torch_plan_add("float32", 99, sum_id, 0, 0, 4, cls)
    raise SystemExit("an out-of-range id was taken")
except ValueError:
    pass
# The plan found: the reduction runs (here, with no GPU, the C++ call says so; the process stays
# usable and nothing is left half made).
before = sys.getrefcount(t)
r = None
for _ in range(3):
    try:
        r = _tally._torch_reduce(t, sum_id, "propagate", "exact")
        assert type(r) is cls and r._keep is t and r._stream == 0, r
        assert r.item() == 0.0
        print("gpu")
    except tally.TallyError as e:
        assert "no CUDA GPU" in str(e), e
        print("no gpu:", e)
del r
assert sys.getrefcount(t) == before, (sys.getrefcount(t), before)
print("ok")
'''


def test_torch_native_path_takes_only_what_it_has_a_plan_for():
    # python/src/torch_path.cpp with a stand-in for torch.Tensor, in a process of its own (the
    # setup is process-wide): None sends a call to the general path (which checks and raises),
    # False asks for a plan; with a plan, the call reaches the C++ reduction.
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _TORCH_PATH_SCRIPT], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().endswith("ok"), p.stdout


_TORCH_STANDIN_SCRIPT = r'''
import sys
import types

torch = types.ModuleType("torch")  # a stand-in: what tally asks of torch, no GPU needed


class dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


for name in ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
             "complex64"):
    setattr(torch, name, dtype(name))


class Tensor:
    def __init__(self, dt, cuda=True, device=0, contiguous=True):
        self.dtype, self.is_cuda, self.device_index, self.contiguous = dt, cuda, device, contiguous
        self.shape = (0,)

    def get_device(self): return self.device_index
    def is_contiguous(self): return self.contiguous
    def data_ptr(self): return 0x7000
    def numel(self): return 0  # nothing is read at 0x7000 (on a GPU: the sum of nothing)
    def stride(self): return (1,)


Tensor.__module__ = "torch"
torch.Tensor = Tensor
torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda d: 0)
sys.modules["torch"] = torch

import tally  # noqa: E402

counting = tally._path_counts()  # the calls that leave the native path
calls = counting.__enter__()


def run(x, **kw):
    """The sum of nothing on a GPU (a Result for a device tensor, a Python number for a host one);
    without a GPU, the C++ call's error (the path was reached)."""
    try:
        r = tally.sum(x, **kw)
        assert (r if isinstance(r, float) else r.item()) == 0.0, r
    except tally.TallyError as e:
        assert "no CUDA GPU" in str(e), e


t = Tensor(torch.float32)
run(t)  # torch is new to tally: the general path sets the native one up
assert calls == {"general": 1, "plan": 0}, calls
run(t)  # no plan yet: checked and added, then the native path
assert calls == {"general": 1, "plan": 1}, calls
for _ in range(3):
    run(t)
    run(Tensor(torch.float32, device=1 if tally.device_count() > 1 else 0))
assert calls == {"general": 1, "plan": 1}, calls
run(t, mode="exact")  # another mode: another plan
run(t, mode="exact")
assert calls == {"general": 1, "plan": 2}, calls
run(Tensor(torch.float32, cuda=False, device=0))  # another backend's device 0 (MPS, XPU): not CUDA
assert calls == {"general": 2, "plan": 2}, calls
run(Tensor(torch.float32, cuda=False, device=-1))  # a CPU tensor: the host path
assert calls == {"general": 3, "plan": 2}, calls
try:
    tally.sum(Tensor(torch.float32, contiguous=False))
    raise SystemExit("a strided tensor was taken")
except ValueError as e:
    assert "not C-contiguous" in str(e), e
try:
    tally.sum(Tensor(torch.complex64))
    raise SystemExit("a complex tensor was taken")
except TypeError as e:
    assert "complex64" in str(e), e
try:
    tally.sum(t, mode="kahan")
    raise SystemExit("an unknown mode was taken")
except ValueError as e:
    assert "kahan" in str(e), e
print("ok")
'''


def test_torch_tensors_take_the_native_path_after_one_check():
    # The Python half of the per-call path (python/tally/__init__.py: _named, _torch_plan_add,
    # _from_torch's setup) with a stand-in torch module, in a process of its own: the general
    # path runs once (torch new to tally), each (dtype, op, nan, mode) is checked once, then only
    # the native call runs; other backends, CPU and strided tensors and bad arguments go to the
    # general path, which reduces them or names the problem.
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _TORCH_STANDIN_SCRIPT], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().endswith("ok"), p.stdout


class _HostResult(tally.Result):
    """A Result whose values are given (its .tolist() stands in for the read from the GPU)."""
    __slots__ = ("_values",)

    def tolist(self):
        return self._values


def _host_result(shape, rtype, values, arg=False):
    r = object.__new__(_HostResult)
    r.shape, r._rtype, r._arg, r._stats, r._values = tuple(shape), rtype, arg, False, values
    return r


def test_result_numpy_keeps_the_result_dtype():
    # Result.numpy() gives the result dtype, not what numpy would guess from Python numbers
    # (float64 for every float, int64 or object for integers). The values are exact in their
    # dtype, so the array gives them back unchanged.
    inf, nan = float("inf"), float("nan")
    cases = [((2,), "f32", [1.5, -2.0], False, np.float32),
             ((2, 2), "f32", [[0.5, 1.5 * 2.0 ** 127], [-inf, 2.0 ** -149]], False, np.float32),
             ((1,), "f64", [0.1], False, np.float64),
             ((3,), "u64", [0, 2 ** 64 - 1, 7], False, np.uint64),
             ((2,), "i64", [-(2 ** 63), 2 ** 63 - 1], False, np.int64),
             ((2,), "i32", [-(2 ** 31), 5], False, np.int32),
             ((2,), "b8", [True, False], False, np.bool_),
             ((2,), "f32", [3, 0], True, np.int64),  # argmax: the indices
             ((0,), "f32", [], False, np.float32),
             ((2, 0), "u64", [[], []], False, np.uint64)]
    for shape, rtype, values, arg, want in cases:
        got = _host_result(shape, rtype, values, arg).numpy()
        assert got.dtype == want, (rtype, got.dtype)
        assert got.shape == shape
        assert got.tolist() == values, (rtype, got.tolist())
    got = _host_result((1,), "f32", [nan]).numpy()
    assert got.dtype == np.float32 and np.isnan(got[0])
    with pytest.raises(TypeError, match="records"):
        r = _host_result((1,), "f64", [None])
        r._stats = True
        r.numpy()
