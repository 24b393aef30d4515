"""tally from Python: fast, correct reductions of CuPy, PyTorch, Numba, JAX and NumPy arrays.

    import tally, torch
    t = torch.rand(1 << 20, device="cuda")
    s = tally.sum(t)            # a 0-d result left on the GPU (no synchronisation)
    float(s)                    # its value (waits for it)
    tally.sum(t, mode="exact").item()
    tally.max(t, axis=0)        # along an axis: an array of results on the GPU
    torch.from_dlpack(tally.sum(t, axis=1))   # results go to any framework without a copy
    tally.sum(numpy_array)      # host arrays: streamed through pinned staging, a Python number

Inputs are read in place: PyTorch tensors and CuPy arrays directly, on the framework's current
stream; others through DLPack (``__dlpack__``: JAX ...) or the CUDA array interface
(``__cuda_array_interface__``: Numba), ordered after the producer's stream; ``stream=`` names
another stream. They must be C-contiguous. Device inputs give ``tally.Result``
objects on the device (DLPack and CUDA-array-interface exporters with ``.item()``, ``float()``,
``int()``, ``.numpy()``); host inputs (NumPy, or anything on the CPU) give Python numbers or NumPy
arrays. The ``*_value`` forms (``tally.sum_value`` ...) always return host values.
"""
from __future__ import annotations

import builtins as _builtins
import contextlib
import ctypes
import functools
import math as _math
import operator as _operator

from . import _tally
from ._tally import TallyError

# The version of the libtally inside the package (include/tally/version.hpp; the package's
# metadata reads the same file).
__version__ = _tally.library_version

__all__ = [
    "__version__", "TallyError", "Result", "reduce", "sum", "prod", "min", "max", "argmin", "argmax", "mean", "norm",
    "sum_sq", "any", "all", "bit_and", "bit_or", "bit_xor", "dot", "stats", "reduce_value", "sum_value",
    "reduce_segments", "stats_segments", "device_count", "tally_dtype",
]

_OPS = {"sum", "prod", "min", "max", "bit_and", "bit_or", "bit_xor", "all", "any", "argmin", "argmax",
        "sum_sq", "norm2", "mean"}

# ---- dtypes -----------------------------------------------------------------------------------
# numpy-style type codes (kind + bytes) to tally's names, and back.
_FROM_CODE = {"b1": "b8", "i1": "i8", "u1": "u8", "i2": "i16", "u2": "u16", "i4": "i32", "u4": "u32",
              "i8": "i64", "u8": "u64", "f2": "f16", "f4": "f32", "f8": "f64", "bf2": "bf16"}
_TO_CODE = {v: k for k, v in _FROM_CODE.items()}
# DLPack type codes: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5, kDLBool 6.
_DL_KIND = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "b"}


def tally_dtype(code: str) -> str:
    """tally's dtype name for a numpy-style type code ('<f4', '|b1', 'bf2'); TypeError if none."""
    c = code.lstrip("<>|=")
    if code[:1] == ">" and c[1:] != "1":
        raise TypeError(f"big-endian data ({code}) is not supported")
    if c not in _FROM_CODE:
        raise TypeError(f"tally does not reduce arrays of type {code!r} "
                        "(bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64)")
    return _FROM_CODE[c]


# ---- the array protocols -----------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_kDLCPU, _kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged = 1, 2, 3, 13


class _Array:
    """What tally needs of an input: address, shape, dtype, where it lives, the stream to use."""

    __slots__ = ("address", "shape", "dtype", "device", "stream", "keep", "n", "ordinal", "trusted")

    def __init__(self, address, shape, dtype, device, stream, keep, ordinal=None, trusted=False, n=None):
        self.address, self.shape, self.dtype = address, tuple(shape), dtype
        self.device, self.stream, self.keep = device, stream, keep  # device: "cuda" | "cpu"
        self.ordinal = ordinal  # the GPU, when the producer says (else the current device)
        # True when a framework describes the memory as device memory of GPU `ordinal` (torch,
        # CuPy, DLPack): tally then skips the driver's pointer queries, which only repeat what the
        # framework guarantees. The CUDA array interface names no GPU: its pointers are checked.
        self.trusted = trusted
        self.n = _math.prod(self.shape) if n is None else n


def _gpu(a):
    """The GPU a native call makes current for input a: the producer's (-1: the current one, as for
    host inputs and the CUDA array interface, which names no GPU)."""
    return -1 if a.ordinal is None else a.ordinal


def _contiguous(shape, strides, itemsize, what):
    """strides in elements (None: C order); ValueError unless C-contiguous."""
    if strides is None:
        return
    expect = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != expect:
            raise ValueError(f"{what}: the array is not C-contiguous (shape {tuple(shape)}, strides "
                             f"{tuple(strides)} elements); pass a contiguous copy")
        expect *= d


def _stream_arg(stream):
    """A stream given by the caller: an int handle, or an object with .cuda_stream / .ptr / .handle."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError(f"stream= takes an int handle or a stream object (torch, cupy, numba), not {type(stream).__name__}")


def _from_interface(obj, cai, device, stream):
    data = cai.get("data")
    if not data:
        raise TypeError(f"{type(obj).__name__}: the array interface has no data pointer")
    shape = tuple(int(d) for d in cai["shape"])
    dtype = tally_dtype(cai["typestr"])
    itemsize = _tally.dtype_size(dtype)
    strides = cai.get("strides")
    if strides is not None:
        if _builtins.any(s % itemsize for s in strides):
            raise ValueError(f"{type(obj).__name__}: strides {strides} are not whole elements")
        strides = [s // itemsize for s in strides]
    _contiguous(shape, strides, itemsize, type(obj).__name__)
    if device == "cuda":
        # The CUDA array interface (v3): the producer's stream, which tally's must wait for.
        producer = cai.get("stream")
        use = 0 if stream is None else stream
        if producer is not None and producer != use:
            _tally.stream_wait(producer, use)  # 1 and 2 are the runtime's legacy / per-thread handles
        stream = use
    return _Array(int(data[0]), shape, dtype, device, stream or 0, obj)


def _from_dlpack(obj, stream):
    dev_type, dev_id = obj.__dlpack_device__()
    device = "cuda" if dev_type in (_kDLCUDA, _kDLCUDAManaged) else "cpu"
    if device == "cuda":
        # The consumer names its stream; the producer orders its work before it. tally's default is
        # the legacy default stream (1 in the DLPack convention).
        s = 1 if not stream else stream
        capsule = obj.__dlpack__(stream=s)
    else:
        capsule = obj.__dlpack__()
    p = _capsule_pointer(capsule, b"dltensor")
    t = _DLManagedTensor.from_address(p).dl_tensor
    kind = _DL_KIND.get(t.dtype.code)
    if kind is None or t.dtype.lanes != 1:
        raise TypeError(f"{type(obj).__name__}: DLPack type code {t.dtype.code} (bits {t.dtype.bits}, lanes "
                        f"{t.dtype.lanes}) is not a type tally reduces")
    dtype = tally_dtype(f"{kind}{t.dtype.bits // 8}")
    shape = tuple(t.shape[k] for k in range(t.ndim))
    strides = None if not t.strides else [t.strides[k] for k in range(t.ndim)]
    _contiguous(shape, strides, 0, type(obj).__name__)
    # The capsule keeps the producer's memory alive while tally reads it.
    trusted = dev_type == _kDLCUDA
    return _Array((t.data or 0) + t.byte_offset, shape, dtype, device, stream or 0, (obj, capsule),
                  dev_id if trusted else None, trusted)


_TORCH_DTYPES = None
_TORCH_RAW_STREAM = None


def _from_torch(x, stream):
    """torch.Tensor without the protocols' per-call cost: its pointer, and its current stream."""
    global _TORCH_DTYPES, _TORCH_RAW_STREAM
    import torch
    if _TORCH_DTYPES is None:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the fast form of current_stream()
        _TORCH_RAW_STREAM = raw if raw is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)
        _TORCH_DTYPES = {torch.bool: "b8", torch.int8: "i8", torch.uint8: "u8", torch.int16: "i16",
                         torch.int32: "i32", torch.int64: "i64", torch.float16: "f16", torch.bfloat16: "bf16",
                         torch.float32: "f32", torch.float64: "f64"}
        for name, code in (("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64")):
            if hasattr(torch, name):
                _TORCH_DTYPES[getattr(torch, name)] = code
        _tally._torch_setup(torch.Tensor, _TORCH_RAW_STREAM)  # tally.sum(t)'s native per-call path
    dtype = _TORCH_DTYPES.get(x.dtype)
    if dtype is None:
        raise TypeError(f"tally does not reduce torch tensors of {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"torch.Tensor: the tensor is not C-contiguous (shape {tuple(x.shape)}, strides "
                         f"{tuple(x.stride())} elements); pass x.contiguous()")
    if x.is_cuda:
        d = x.get_device()
        s = _TORCH_RAW_STREAM(d) if stream is None else stream
        return _Array(x.data_ptr(), x.shape, dtype, "cuda", s, x, d, True, x.numel())
    return _Array(x.data_ptr(), x.shape, dtype, "cpu", 0, x, None, False, x.numel())


def _from_cupy(x, stream):
    """cupy.ndarray directly: its pointer, and cupy's current stream."""
    import cupy
    if not x.flags.c_contiguous:
        raise ValueError(f"cupy.ndarray: the array is not C-contiguous (shape {x.shape}, strides {x.strides} bytes); "
                         "pass cupy.ascontiguousarray(x)")
    s = stream if stream is not None else cupy.cuda.get_current_stream().ptr
    return _Array(x.data.ptr, tuple(x.shape), tally_dtype(x.dtype.str), "cuda", s, x, x.device.id, True, x.size)


def _as_array(x, stream=None):
    a = _as_array_of(x, _stream_arg(stream))
    if stream is not None and not isinstance(stream, int):
        a.keep = (a.keep, stream)  # the stream object outlives the results that use its handle
    return a


def _as_array_of(x, stream):
    module = type(x).__module__
    if module.startswith("torch") and type(x).__name__ in ("Tensor", "Parameter"):
        return _from_torch(x, stream)
    if module.startswith("cupy") and type(x).__name__ == "ndarray":
        return _from_cupy(x, stream)
    # NumPy (host) by its array interface; device arrays by DLPack where they have it (every dtype,
    # bfloat16 included, and the stream handshake), else by the CUDA array interface (Numba).
    if hasattr(x, "__array_interface__"):
        return _from_interface(x, x.__array_interface__, "cpu", stream)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return _from_dlpack(x, stream)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_interface(x, x.__cuda_array_interface__, "cuda", stream)
    raise TypeError(f"tally reduces arrays with __dlpack__, __cuda_array_interface__ or __array_interface__ "
                    f"(CuPy, PyTorch, Numba, JAX, NumPy), not {type(x).__name__}")


# ---- results -------------------------------------------------------------------------------------
class Result:
    """Results left on the GPU: DLPack (``__dlpack__``) and ``__cuda_array_interface__`` exporter,
    with ``.item()``, ``float()``, ``int()``, ``bool()`` and ``.numpy()`` to read them (blocking).
    argmin/argmax results export their int64 indices (``.values()`` gives the extreme values)."""

    __slots__ = ("shape", "_dtype", "_op", "_stream", "_count", "_stats", "_arg", "_rtype", "_buffer", "_keep",
                 "_segments", "__weakref__")

    def __init__(self, shape, dtype, op, stream, ordinal=None):
        rtype, unit = _result_of(dtype, op)
        n = _math.prod(shape)
        device = _tally.current_device() if ordinal is None else ordinal
        _fill(self, _tally.DeviceBuffer(unit * _builtins.max(n, 1), device, stream, True), tuple(shape), n, dtype, op,
              stream, rtype, None)

    @property
    def address(self):
        return self._buffer.address

    @property
    def dtype(self):
        return "i64" if self._arg else self._rtype

    def _view(self):
        if self._stats:
            raise TypeError("stats results are records: read them with .item() / .tolist()")
        strides = []
        step = 2 if self._arg else 1
        for k in range(len(self.shape)):
            s = step
            for d in self.shape[k + 1:]:
                s *= d
            strides.append(s)
        return self._buffer.view(list(self.shape), strides, _TO_CODE[self.dtype])

    def __dlpack__(self, stream=None, **kwargs):
        if stream is not None and stream != -1:
            _tally.stream_wait(self._stream, stream, self._buffer.device)  # 1, 2: the legacy / per-thread streams
        return self._view().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (_kDLCUDA, self._buffer.device)

    @property
    def __cuda_array_interface__(self):
        self._buffer.mark_exported()
        itemsize = 8 if self._arg else _tally.dtype_size(self._rtype)
        code = _TO_CODE[self.dtype]
        strides = None
        if self._arg:
            strides = tuple(16 * (self._count // _builtins.max(1, _prod(self.shape[:k + 1]))) for k in range(len(self.shape)))
        return {"shape": self.shape, "typestr": "<" + code if code != "b1" else "|b1", "data": (self.address, False),
                "version": 3, "strides": strides, "stream": self._stream or 1, "itemsize": itemsize}

    def _verify(self):
        # Results of reduce_segments(..., unsafe=True): the offsets are checked before a read on
        # the host, until they pass (bad offsets left the results unwritten: TallyError names the
        # segment, at every read).
        seg = self._segments
        if seg is not None:
            _check_segments(*seg, self._stream, "tally.reduce_segments")
            self._segments = None

    def tolist(self):
        self._verify()
        if self._stats:
            out = _tally.stats_to_host(self.address, self._count, self._stream, self._buffer.device)
            return _shape_list(out, self.shape)
        op = "argmax" if self._arg else self._op if self._op != "dot" else "sum"
        dtype = self._dtype if self._op != "dot" else self._rtype
        values, indices = _tally.results_to_host(self.address, self._count, dtype, op, self._stream,
                                                 self._buffer.device)
        return _shape_list(indices if self._arg else values, self.shape)

    def values(self):
        """argmin/argmax: the extreme values (with the indices, .tolist() / .item())."""
        self._verify()
        values, _ = _tally.results_to_host(self.address, self._count, self._dtype, self._op, self._stream,
                                           self._buffer.device)
        return _shape_list(values, self.shape)

    def item(self):
        if self._count != 1:
            raise ValueError(f"item() of {self._count} results: use tolist()")
        v = self.tolist()
        while isinstance(v, list):
            v = v[0]
        return v

    def numpy(self):
        """The results as a numpy array of the result dtype (``.dtype``: float32 for f32, f16 and bf16
        inputs' float results, int64 or uint64 for integer sums; argmin/argmax: their int64 indices)."""
        import numpy as np
        if self._stats:
            raise TypeError("stats results are records: read them with .tolist()")
        flat = self.tolist() if not self.shape else _flat(self.tolist(), len(self.shape))
        return np.asarray(flat, dtype=np.dtype(_TO_CODE[self.dtype])).reshape(self.shape)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    def __repr__(self):
        return f"tally.Result(shape={self.shape}, dtype={self.dtype}, op={self._op})"

    def __copy__(self):
        # A whole-array result's class holds its fixed fields (_scalar_class): copy the slots
        # that this class leaves to its instances (a shallow copy: the same device buffer).
        cls = type(self)
        r = _new_result(cls)
        for name in Result.__slots__:
            if name != "__weakref__" and isinstance(getattr(cls, name), _MemberDescriptor) and hasattr(self, name):
                setattr(r, name, getattr(self, name))
        return r


_MemberDescriptor = type(Result.shape)  # a slot's descriptor


def _fill(r, buffer, shape, count, dtype, op, stream, rtype, keep):
    r.shape, r._count, r._dtype, r._op, r._stream, r._rtype = shape, count, dtype, op, stream, rtype
    r._stats, r._arg = op == "stats", op == "argmin" or op == "argmax"
    r._buffer, r._keep, r._segments = buffer, keep, None
    return r


_new_result = object.__new__


@functools.lru_cache(maxsize=None)
def _scalar_class(dtype, op, rtype):
    """A Result subclass for one reduction of a whole array (dtype, op): its fixed fields are class
    attributes, so a call sets only the buffer, the stream and the input it keeps alive (three
    stores, not ten: the per-call path of tally.sum(x))."""
    fixed = {"shape": (), "_count": 1, "_dtype": dtype, "_op": op, "_rtype": rtype, "_stats": op == "stats",
             "_arg": op in ("argmin", "argmax"), "_segments": None}
    return type("Result", (Result,), {"__slots__": (), "__module__": __name__, "__qualname__": "Result", **fixed})


@functools.lru_cache(maxsize=1024)
def _result_of(dtype, op):
    """The result dtype of (dtype, op) and the bytes one result takes (records for arg ops, stats)."""
    if op == "stats":
        return "f64", 48
    r = _tally.dot_result_dtype(dtype) if op == "dot" else _tally.result_dtype(dtype, op)
    return r, 16 if op in ("argmin", "argmax") else _tally.dtype_size(r)


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _flat(nested, depth):
    for _ in range(depth - 1):
        nested = [v for row in nested for v in row]
    return nested


def _shape_list(flat, shape):
    if not shape:
        return flat[0]
    if 0 in shape:
        return [] if shape[0] == 0 else [_shape_list([], shape[1:]) for _ in range(shape[0])]
    out = list(flat)
    for d in reversed(shape[1:]):
        out = [out[i:i + d] for i in range(0, len(out), d)]
    return out


# ---- the reductions ---------------------------------------------------------------------------------
# (sum, min, max, any and all below shadow the builtins in this module: internal code uses
# _builtins.)
def _index(v, what, name, expected):
    """v as a Python int: ints and integer scalars (numpy.int64, ...), as numpy takes them; bools
    (Python's or numpy's) and anything else refused, as numpy refuses them."""
    if isinstance(v, bool) or type(v).__name__ in ("bool", "bool_"):
        raise TypeError(f"{what}: {name} must be {expected}, not {type(v).__name__}")
    try:
        return _operator.index(v)
    except TypeError:
        raise TypeError(f"{what}: {name} must be {expected}, not {type(v).__name__}") from None


def _axes(axis, ndim, what):
    """The reduced axes as (first, count), adjacent, in range; None: all."""
    if axis is None:
        return None
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    if not axes:
        raise ValueError(f"{what}: axis=() reduces nothing")
    norm = []
    for a in axes:
        a = _index(a, what, "axis", "an int or a tuple of ints")
        if a < -ndim or a >= ndim:
            raise ValueError(f"{what}: axis {a} is out of range for an array of {ndim} dimensions")
        norm.append(a % ndim)
    norm.sort()
    if len(set(norm)) != len(norm):
        raise ValueError(f"{what}: axis {tuple(axes)} repeats an axis")
    if norm != list(range(norm[0], norm[0] + len(norm))):
        raise ValueError(f"{what}: the axes {tuple(axes)} are not adjacent (tally reduces adjacent axes at once)")
    if len(norm) == ndim:
        return None
    return norm[0], len(norm)


@functools.lru_cache(maxsize=1024)
def _why(dtype, op, nan, mode):
    return _tally.why_unsupported(dtype, op, nan, mode)


def _check_op(dtype, op, nan, mode, what):
    if op not in _OPS:
        raise ValueError(f"{what}: unknown op {op!r} ({', '.join(sorted(_OPS))})")
    if nan not in ("propagate", "ignore"):
        raise ValueError(f"{what}: nan must be 'propagate' or 'ignore', not {nan!r}")
    if mode not in ("fast", "compensated", "exact"):
        raise ValueError(f"{what}: mode must be 'fast', 'compensated' or 'exact', not {mode!r}")
    why = _why(dtype, op, nan, mode)
    if why:
        raise ValueError(f"{what}: {why}")


_PLANS = {}


def _plan(dtype, op, nan, mode, what):
    """(dtype, op, nan, mode) checked once, as the native layer's ids plus the result's dtype and
    bytes and a whole-array result's class: the per-call work of a reduction is a dictionary look-up."""
    key = (dtype, op, nan, mode)
    p = _PLANS.get(key)
    if p is None:
        _check_op(dtype, op, nan, mode, what)
        rtype, unit = _result_of(dtype, op)
        p = _PLANS[key] = (_tally.dtype_id(dtype), _tally.op_id(op), _tally.nan_id(nan), _tally.mode_id(mode), rtype,
                           unit, _scalar_class(dtype, op, rtype))
    return p


def _torch_plan(x, op, nan, mode):
    """The fast path's plan for a torch dtype: the native ids, the result's bytes and its class."""
    dtype = _from_torch(x, None).dtype  # TypeError for a dtype tally does not reduce
    p = _plan(dtype, op, nan, mode, f"tally.{op}")
    return p[:4] + (p[5], p[6])


def reduce(x, op="sum", axis=None, *, nan="propagate", mode="fast", stream=None, out=None):
    """Reduce x with op ('sum', 'max', 'argmax', ...) over all of it or along axis (an int or a tuple
    of adjacent ints). Device inputs: a Result on the device (or written into out, a Result from
    an earlier call). Host inputs: a Python number (or a NumPy array along an axis)."""
    a = _as_array(x, stream)
    _plan(a.dtype, op, nan, mode, f"tally.{op}")  # the arguments checked (once per combination)
    ax = _axes(axis, len(a.shape), f"tally.{op}")
    _out_arg(out, a.device == "cpu", f"tally.{op}", "result is a Python number or a NumPy array")
    if a.device == "cpu":
        if ax is None:
            v, index = _tally.reduce_value(a.address, a.n, a.dtype, op, nan, mode, 0)
            return index if op in ("argmin", "argmax") else v
        res = _reduce_device(_to_device(a), op, ax, nan, mode, None)
        return res.numpy()
    return _reduce_device(a, op, ax, nan, mode, out)


def _to_device(a, ordinal=None, stream=-1):
    """A host array copied to the GPU (the current one, or GPU ordinal): the axis and segment
    reductions read the whole array there. stream >= 0: the copy is ordered on that stream (of
    that GPU), else it is a blocking copy."""
    if a.device == "cuda":
        return a
    nbytes = a.n * _tally.dtype_size(a.dtype)
    device = _tally.current_device() if ordinal is None else ordinal
    buf = _tally.DeviceBuffer(nbytes, device, 0, False)  # not kept in the pool
    buf.upload(a.address, nbytes, stream)
    return _Array(buf.address, a.shape, a.dtype, "cuda", _builtins.max(stream, 0), (a.keep, buf), ordinal,
                  ordinal is not None)


def _out_arg(out, host, what, host_gives):
    """out= as given: None, or a Result of an earlier call, and only for device inputs."""
    if out is not None and not isinstance(out, Result):
        raise TypeError(f"{what}: out must be a Result from an earlier tally call, not {type(out).__name__}")
    if out is not None and host:
        raise ValueError(f"{what}: out= is for device inputs (a host input's {host_gives})")


def _check_out(out, shape, dtype, op, stream, ordinal, what):
    """out (a Result of an earlier call) holds exactly shape results of (dtype, op), on the same
    GPU and stream as this call."""
    if out.shape != shape or out._op != op or out._dtype != dtype:
        raise ValueError(f"{what}: out holds {out.shape} {out._op} results of {out._dtype}, this call gives "
                         f"{shape} {op} results of {dtype}")
    if ordinal is not None and out._buffer.device != ordinal:
        raise ValueError(f"{what}: out is on GPU {out._buffer.device} and the input on GPU {ordinal}")
    if out._stream != stream:
        raise ValueError(f"{what}: out was made on stream {out._stream:#x} and this call runs on {stream:#x}: "
                         "reuse out only on its own stream")


def _reduce_device(a, op, ax, nan, mode, out):
    shape = () if ax is None else a.shape[:ax[0]] + a.shape[ax[0] + ax[1]:]
    p = _plan(a.dtype, op, nan, mode, f"tally.{op}")
    device = _gpu(a)
    if out is None and ax is None:
        buf = _tally.reduce_new(a.address, a.n, p[0], p[1], p[2], p[3], a.stream, device, p[5], not a.trusted)
        r = _new_result(p[6])
        r._buffer, r._stream, r._keep = buf, a.stream, a.keep
        return r
    if out is not None:
        _check_out(out, shape, a.dtype, op, a.stream, a.ordinal, f"tally.{op}")
    res = out if out is not None else Result(shape, a.dtype, op, a.stream, a.ordinal)
    # out= is a Result (tally's own buffer) or was refused above: only the input needs checking.
    if ax is None:
        _tally.reduce(a.address, a.n, p[0], p[1], res.address, p[2], p[3], a.stream, device, not a.trusted)
    else:
        _tally.reduce_axis(a.address, list(a.shape) or [1], ax[0], ax[1], p[0], p[1], res.address, p[2], p[3], a.stream,
                           device, not a.trusted)
    res._keep = a.keep
    if res._segments is not None:
        res._segments = None  # written now: an earlier call's unchecked offsets no longer matter
    return res


def reduce_value(x, op="sum", *, nan="propagate", mode="fast", stream=None):
    """The blocking form: the reduction of all of x as a Python number (argmin/argmax: the index)."""
    a = _as_array(x, stream)
    _plan(a.dtype, op, nan, mode, f"tally.{op}")
    v, index = _tally.reduce_value(a.address, a.n, a.dtype, op, nan, mode, a.stream, _gpu(a))
    return index if op in ("argmin", "argmax") else v


def _torch_plan_add(x, op, nan, mode):
    """Checks (dtype of x, op, nan, mode) once (TypeError / ValueError) and gives the native per-call
    path its plan: the ids, one result's bytes and the whole-array Result class."""
    p = _torch_plan(x, op, nan, mode)
    _tally._torch_plan_add(x.dtype, p[0], p[1], p[2], p[3], p[4], p[5])


@contextlib.contextmanager
def _path_counts():
    """For tests and the bench: counts, while the context lasts, the calls that leave the native
    per-call path of tally.sum(t) and friends: the general path (`general`: tally.reduce) and the
    plans' check (`plan`: _torch_plan_add). Yields the dict of counts."""
    counts = {"general": 0, "plan": 0}
    saved = {"reduce": reduce, "_torch_plan_add": _torch_plan_add}

    def counted(key, fn):
        def wrapper(*a, **k):
            counts[key] += 1
            return fn(*a, **k)
        return wrapper
    g = globals()
    g["reduce"], g["_torch_plan_add"] = counted("general", reduce), counted("plan", _torch_plan_add)
    try:
        yield counts
    finally:
        g.update(saved)


def _named(op, doc):
    op_id = _tally.op_id(op)
    native = _tally._torch_reduce

    def f(x, axis=None, *, nan="propagate", mode="fast", stream=None, out=None):
        # A contiguous CUDA torch.Tensor, all of it, on torch's current stream: one native call
        # (python/src/torch_path.cpp) reads the tensor, launches and makes the Result. It answers
        # None for everything else (the general path below), False for a combination it has no
        # plan for yet (checked and added here, once).
        if axis is None and stream is None and out is None:
            r = native(x, op_id, nan, mode)
            if r is not None:
                if r is not False:
                    return r
                _torch_plan_add(x, op, nan, mode)
                r = native(x, op_id, nan, mode)
                if r is not None and r is not False:
                    return r
        return reduce(x, op, axis, nan=nan, mode=mode, stream=stream, out=out)
    f.__name__ = op if op != "norm2" else "norm"
    f.__doc__ = doc
    return f


sum = _named("sum", "Sum (integers exact modulo 2^64 in 64 bits; mode='compensated' or 'exact' for floats).")
prod = _named("prod", "Product.")
min = _named("min", "Minimum (nan='ignore' skips NaNs).")
max = _named("max", "Maximum (nan='ignore' skips NaNs).")
argmin = _named("argmin", "Index of the first minimum.")
argmax = _named("argmax", "Index of the first maximum.")
mean = _named("mean", "Mean (integers: exact 128-bit sum / n).")
norm = _named("norm2", "Euclidean norm sqrt(sum x^2), free of overflow and underflow.")
sum_sq = _named("sum_sq", "Sum of squares.")
any = _named("any", "True if any element is nonzero.")
all = _named("all", "True if every element is nonzero.")
bit_and = _named("bit_and", "Bitwise and (integers).")
bit_or = _named("bit_or", "Bitwise or (integers).")
bit_xor = _named("bit_xor", "Bitwise xor (integers).")


def sum_value(x, *, mode="fast", stream=None):
    """The sum of all of x as a Python number (blocking)."""
    return reduce_value(x, "sum", mode=mode, stream=stream)


def dot(x, y, *, mode="fast", stream=None):
    """sum(x * y) of two float vectors of one dtype and length: a Result for device inputs, a number
    for host inputs."""
    a, b = _as_array(x, stream), _as_array(y, stream)
    if a.dtype != b.dtype:
        raise TypeError(f"tally.dot: x is {a.dtype} and y is {b.dtype}: both must have one dtype")
    if a.n != b.n:
        raise ValueError(f"tally.dot: x has {a.n} elements and y {b.n}")
    if tuple(a.shape) != tuple(b.shape) and (len(a.shape) > 1 or len(b.shape) > 1):
        raise ValueError(f"tally.dot: x has shape {tuple(a.shape)} and y {tuple(b.shape)}: dot takes vectors (or "
                         "two arrays of one shape, read as vectors), not a matrix product")
    if a.dtype not in ("f16", "bf16", "f32", "f64"):
        raise TypeError(f"tally.dot: dot needs float vectors (float16, bfloat16, float32, float64), not {a.dtype}")
    if mode not in ("fast", "compensated", "exact"):
        raise ValueError(f"tally.dot: mode must be 'fast', 'compensated' or 'exact', not {mode!r}")
    if a.ordinal is not None and b.ordinal is not None and a.ordinal != b.ordinal:
        raise ValueError(f"tally.dot: x is on GPU {a.ordinal} and y on GPU {b.ordinal}: both must be on one GPU")
    gpu = _gpu(a) if a.ordinal is not None else _gpu(b)
    if a.device == "cpu" or b.device == "cpu":  # on the device input's stream, if either is one
        return _tally.dot_value(a.address, b.address, a.n, a.dtype, mode, b.stream if a.device == "cpu" else a.stream,
                                gpu)
    res = Result((), a.dtype, "dot", a.stream, None if gpu < 0 else gpu)
    _tally.dot(a.address, b.address, a.n, a.dtype, res.address, mode, a.stream, gpu)
    res._keep = (a.keep, b.keep)
    return res


_STAT_FIELDS = ("count", "sum", "min", "max", "mean", "m2")


def _stats_args(dtype, ddof, nan, what):
    """The input's dtype (numbers, not bool), ddof as an int (0 or more) and nan checked:
    TypeError / ValueError naming what."""
    if dtype == "b8":
        raise TypeError(f"{what}: stats need numbers, not bool")
    ddof = _index(ddof, what, "ddof", "an int")
    if ddof < 0:
        raise ValueError(f"{what}: ddof {ddof}: must be 0 or more")
    if nan not in ("propagate", "ignore"):
        raise ValueError(f"{what}: nan must be 'propagate' or 'ignore', not {nan!r}")
    return ddof


def _with_variance(records, ddof):
    """Each stats record gains variance = m2 / (count - ddof) and std (NaN where count <= ddof)."""
    for r in records:
        dof = r["count"] - ddof
        r["variance"] = r["m2"] / dof if dof > 0 else float("nan")
        r["std"] = r["variance"] ** 0.5 if dof > 0 else float("nan")


def stats(x, axis=None, *, ddof=0, nan="propagate", stream=None):
    """count, sum, min, max, mean, variance and std (with ddof) in one read, as a dict (along an
    axis: a dict of lists)."""
    a = _as_array(x, stream)
    ddof = _stats_args(a.dtype, ddof, nan, "tally.stats")
    ax = _axes(axis, len(a.shape), "tally.stats")
    if ax is None:
        records = [_tally.stats_value(a.address, a.n, a.dtype, nan, a.stream, _gpu(a))]
        shape = ()
    else:
        a = _to_device(a)
        shape = a.shape[:ax[0]] + a.shape[ax[0] + ax[1]:]
        res = Result(shape, a.dtype, "stats", a.stream, a.ordinal)
        _tally.stats_axis(a.address, list(a.shape), ax[0], ax[1], a.dtype, res.address, nan, a.stream, _gpu(a))
        records = _tally.stats_to_host(res.address, _prod(shape), a.stream, res._buffer.device)
    _with_variance(records, ddof)
    if not shape:
        return records[0]
    return {k: _shape_list([r[k] for r in records], shape) for k in _STAT_FIELDS + ("variance", "std")}


# ---- ragged segments -------------------------------------------------------------------------------
def _host_offsets(v, what, name):
    """Offsets given on the host (a NumPy array, a list, a range, a CPU tensor): a contiguous 1-D
    int64 NumPy array (integers only: TypeError for floats or bools)."""
    import numpy as np
    h = np.asarray(v)
    if h.size == 0 and isinstance(v, (list, tuple, range)):
        h = h.astype(np.int64)  # [] reads as float64: no values to be anything else
    if h.dtype.kind not in "iu":
        raise TypeError(f"{what}: {name} must hold integers (int64), not {h.dtype}")
    if h.ndim != 1:
        raise ValueError(f"{what}: {name} must be 1-D, not of shape {h.shape}")
    if h.dtype.kind == "u" and h.size and int(h.max()) > (1 << 63) - 1:
        raise ValueError(f"{what}: {name} holds {int(h.max())}, past int64")
    return np.array(h, dtype=np.int64, copy=True)  # a copy: the caller's may be pinned, or change


def _offsets_of(v, stream, what, name):
    """(device _Array, None) for offsets on a GPU (read in place: int64, 1-D, contiguous; on their
    own framework's stream unless stream= names one), or (None, host int64 array) for offsets on
    the host (uploaded by the caller)."""
    if isinstance(v, (list, tuple, range)) or hasattr(v, "__array_interface__"):
        return None, _host_offsets(v, what, name)
    o = _as_array(v, stream)
    if o.device == "cpu":
        return None, _host_offsets(v, what, name)
    if o.dtype != "i64":
        raise TypeError(f"{what}: {name} on the GPU must be int64, not {o.dtype} (convert them, e.g. "
                        f"offsets.to(torch.int64) or offsets.astype(cupy.int64))")
    if len(o.shape) != 1:
        raise ValueError(f"{what}: {name} must be 1-D, not of shape {o.shape}")
    return o, None


class _Segments:
    """A segmented call's input and offsets, checked without touching the GPU (__init__), then put
    on the GPU (place): offsets alone are CSR (segments + 1 entries, segment s = [offsets[s],
    offsets[s+1])); with ends they are the begins, one per segment. A host input (host = True) is
    copied to the GPU of its offsets, or the current one; host offsets are copied to the input's."""

    def __init__(self, x, offsets, ends, stream, what):
        a = self.a = _as_array(x, stream)
        self.host, self.csr = a.device == "cpu", ends is None
        given = _stream_arg(stream)
        self.parts = [_offsets_of(offsets, given, what, "offsets")]
        if ends is not None:
            self.parts.append(_offsets_of(ends, given, what, "ends"))
        lengths = [o.n if o is not None else h.size for o, h in self.parts]
        if self.csr and lengths[0] == 0:
            raise ValueError(f"{what}: offsets (CSR) hold segments + 1 entries, at least one; got none")
        if not self.csr and lengths[0] != lengths[1]:
            raise ValueError(f"{what}: {lengths[0]} begins (offsets) and {lengths[1]} ends")
        self.segments = lengths[0] - 1 if self.csr else lengths[0]
        self.on_gpu = [o for o, _ in self.parts if o is not None]
        ordinals = {o.ordinal for o in self.on_gpu if o.ordinal is not None}
        if a.device == "cuda" and a.ordinal is not None:
            ordinals.add(a.ordinal)
        if len(ordinals) > 1:
            raise ValueError(f"{what}: the input and its offsets are on different GPUs ({sorted(ordinals)})")
        self.ordinal = next(iter(ordinals)) if ordinals else None
        # The call's stream: the input's, else the device offsets', else the one given (or 0).
        self.stream = (a.stream if a.device == "cuda" else self.on_gpu[0].stream if self.on_gpu
                       else (given or 0))

    def place(self):
        """Orders the call's stream after the offsets' producers, copies what is on the host to
        the GPU (on the call's stream); sets a (the input on the GPU), ordinal, device, begin and
        end (device addresses), keep and trusted."""
        device = _tally.current_device() if self.ordinal is None else self.ordinal
        for o in self.on_gpu:
            if o.stream != self.stream:
                _tally.stream_wait(o.stream, self.stream, device)  # offsets made on another stream
        if self.host:
            self.a = _to_device(self.a, device, self.stream)
            self.ordinal = device
        a = self.a
        keep, addresses, self.trusted = [a.keep], [], a.trusted
        for o, h in self.parts:
            if o is not None:
                keep.append(o.keep)
                addresses.append(o.address)
                self.trusted = self.trusted and o.trusted
                continue
            # Pooled by (GPU, stream, size; sizes rounded up to a power of two, so offsets of
            # changing lengths reuse few buffers): a call of unchecked offsets does not wait for a
            # cudaFree. The copy is ordered on the call's stream; h is the caller's offsets copied
            # to pageable memory (_host_offsets), which the copy has staged when it returns.
            buf = _tally.DeviceBuffer(_builtins.max(16, 1 << (h.nbytes - 1).bit_length()), device, self.stream, True)
            buf.upload(h.ctypes.data, h.nbytes, self.stream)
            keep.append(buf)
            addresses.append(buf.address)
        self.begin = addresses[0]
        self.end = addresses[0] + 8 if self.csr else addresses[1]
        self.keep = tuple(keep)
        self.device = device
        return self


def _check_segments(begin, end, segments, n, device, stream, what):
    """The offsets' check on GPU device (blocking): TallyError naming the call and the segment."""
    try:
        _tally.check_segments(begin, end, segments, n, stream, device)
    except TallyError as e:
        raise TallyError(f"{what}: {e}") from None


def reduce_segments(x, offsets, op="sum", *, ends=None, nan="propagate", mode="fast", stream=None, out=None,
                    unsafe=False):
    """Reduce each ragged segment of x (read flat) with op: segment s is x[offsets[s]:offsets[s+1]]
    (offsets: segments + 1 int64 entries, CSR, as torch.segment_reduce's and torch_scatter's), or
    x[offsets[s]:ends[s]] where ends are given (begins and ends in any order, overlapping allowed).
    An empty segment gives the op's identity (argmin/argmax: index -1); argmin/argmax give the
    index inside the segment; exact mode is the exact sum of each segment rounded once.

    Offsets on the GPU (torch, cupy, JAX, numba int64 arrays on x's GPU) are read in place, after
    the work their own stream has queued; host offsets (NumPy, lists) are uploaded. Device inputs
    give a Result of shape (segments,) on the GPU, host inputs a NumPy array. The offsets are
    checked first (0 <= begin <= end <= x.size; TallyError names the first bad segment; this waits
    for the stream, as torch's checks do); unsafe=True skips that wait: bad offsets then leave the
    results unwritten, which the Result's readers (.tolist(), .item(), .numpy(), .values(),
    float(), int(), bool()) find and raise, if the offsets are unchanged until then, but a
    framework that takes the results through DLPack or the array interface does not."""
    what = f"tally.reduce_segments({op!r})"
    if not isinstance(unsafe, bool) and type(unsafe).__name__ not in ("bool", "bool_"):
        raise TypeError(f"{what}: unsafe must be True or False, not {type(unsafe).__name__}")
    g = _Segments(x, offsets, ends, stream, what)
    p = _plan(g.a.dtype, op, nan, mode, what)
    _out_arg(out, g.host, what, "results are a NumPy array")
    if out is not None:
        _check_out(out, (g.segments,), g.a.dtype, op, g.stream, g.ordinal, what)
    if g.host and not g.segments:  # what Result.numpy() gives: the result dtype (argmin/argmax: int64)
        import numpy as np
        return np.empty(0, np.int64 if op in ("argmin", "argmax") else np.dtype(_TO_CODE[p[4]]))
    g.place()
    a, s = g.a, g.stream
    res = out if out is not None else Result((g.segments,), a.dtype, op, s, g.ordinal)
    if g.segments and not unsafe:
        _check_segments(g.begin, g.end, g.segments, a.n, g.device, s, what)
    if g.segments:
        _tally.reduce_segments(a.address, a.n, g.begin, g.end, g.segments, p[0], p[1], res.address, p[2], p[3], s,
                               g.device, not g.trusted)
    # Set once the call is queued: a failed call leaves out as it was, its pending check included.
    # (res has shape (segments,): never a whole-array Result, whose _segments is a class constant.)
    res._segments = (g.begin, g.end, g.segments, a.n, g.device) if unsafe and g.segments else None
    res._keep = g.keep
    return res.numpy() if g.host else res


def stats_segments(x, offsets, *, ends=None, ddof=0, nan="propagate", stream=None):
    """count, sum, min, max, mean, m2, variance and std of each ragged segment of x (read flat;
    offsets as for reduce_segments), as a dict of lists of one entry per segment (blocking)."""
    what = "tally.stats_segments"
    g = _Segments(x, offsets, ends, stream, what)
    ddof = _stats_args(g.a.dtype, ddof, nan, what)
    records = []
    if g.segments:
        g.place()
        a, s = g.a, g.stream
        _check_segments(g.begin, g.end, g.segments, a.n, g.device, s, what)
        res = Result((g.segments,), a.dtype, "stats", s, g.ordinal)
        _tally.stats_segments(a.address, a.n, g.begin, g.end, g.segments, a.dtype, res.address, nan, s, g.device)
        res._keep = g.keep
        records = _tally.stats_to_host(res.address, g.segments, s, g.device)
    _with_variance(records, ddof)
    return {k: [r[k] for r in records] for k in _STAT_FIELDS + ("variance", "std")}


def device_count():
    """Usable CUDA devices (0 without a GPU or driver)."""
    return _tally.device_count()

