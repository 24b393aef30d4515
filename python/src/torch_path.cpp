// tally.sum(t) and friends for a torch tensor, per call (issue 12: the Python layer's cost over
// the C++ call at most 3 us). The same steps as the general path (python/tally/__init__.py), for
// the one case that matters most for speed: a contiguous CUDA torch.Tensor, all of it, on torch's
// current stream. Written in Python they were ~60 bytecodes around seven torch accessors and one
// native call, 1.5-3.3 us on the H100 hosts (scripts/python-bench.py's "piece by piece" table);
// here they are C API calls under the GIL, with the plan of each (torch dtype, op, nan, mode)
// found in a table that the Python layer fills after checking the arguments once.
//
// _torch_reduce(x, op, nan, mode) returns a tally.Result, or None when x is not for this path
// (not exactly a torch.Tensor, not a CUDA tensor, not contiguous, nan/mode not a known name: the general
// path takes it and raises where it must), or False when the combination has no plan yet (the
// Python layer checks it, adds it with _torch_plan_add and calls again).
#include <Python.h>

#include <cstdint>
#include <map>
#include <string_view>
#include <tuple>

#include "native.hpp"

namespace tally_py {

using namespace nb::literals;

namespace {

// A new reference or a thrown Python error.
PyObject* checked(PyObject* o) {
  if (o == nullptr) throw nb::python_error();
  return o;
}

PyObject* interned(const char* s) { return checked(PyUnicode_InternFromString(s)); }

struct torch_plan {
  tally::dtype dtype;
  tally::op op;
  tally::options opt;
  std::size_t bytes;   // one result's bytes
  nb::object result;   // the whole-array Result class of (dtype, op)
};

// Everything here is touched only with the GIL held.
struct torch_state {
  nb::object tensor_type, raw_stream;  // torch.Tensor; device -> torch's current stream handle
  PyObject *is_cuda = nullptr, *get_device = nullptr, *is_contiguous = nullptr, *data_ptr = nullptr, *numel = nullptr,
           *dtype = nullptr, *buffer = nullptr, *stream = nullptr, *keep = nullptr;
  // (torch dtype object, op, nan, mode) -> plan; the dtype objects are held in `keys`.
  std::map<std::tuple<PyObject*, int, int, int>, torch_plan> plans;
  std::vector<nb::object> keys;
};

torch_state& state() {
  static torch_state* s = new torch_state;  // never destroyed: Python objects at exit
  return *s;
}

// tally's nan policy / accuracy for a name (tally's own parsers), or -1: not a str, or a name
// they do not know (the general path says what is wrong).
template <class Parse>
int id_of(PyObject* s, Parse parse) {
  if (!PyUnicode_Check(s)) return -1;
  Py_ssize_t len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(s, &len);
  if (utf8 == nullptr) {
    PyErr_Clear();  // not encodable (lone surrogates): no name of tally's
    return -1;
  }
  const auto v = parse(std::string_view(utf8, static_cast<std::size_t>(len)));
  return v ? static_cast<int>(*v) : -1;
}

std::uint64_t as_u64(PyObject* o) {
  const unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw nb::python_error();
  return v;
}

nb::object torch_reduce(nb::handle x, int op, nb::handle nan, nb::handle mode) {
  torch_state& st = state();
  if (!st.tensor_type.is_valid() || Py_TYPE(x.ptr()) != reinterpret_cast<PyTypeObject*>(st.tensor_type.ptr()))
    return nb::none();
  // CUDA tensors only: get_device() also numbers the GPUs of other backends (MPS, XPU, ...).
  nb::object cuda = nb::steal(checked(PyObject_GetAttr(x.ptr(), st.is_cuda)));
  if (cuda.ptr() != Py_True) return nb::none();  // the CPU (the host path) or another backend
  nb::object device = nb::steal(checked(PyObject_CallMethodNoArgs(x.ptr(), st.get_device)));
  const long d = PyLong_AsLong(device.ptr());
  if (d == -1 && PyErr_Occurred()) throw nb::python_error();
  if (d < 0) return nb::none();
  nb::object contiguous = nb::steal(checked(PyObject_CallMethodNoArgs(x.ptr(), st.is_contiguous)));
  if (contiguous.ptr() != Py_True) return nb::none();  // the general path raises ValueError
  const int nan_i = id_of(nan.ptr(), tally::parse_nan_policy), mode_i = id_of(mode.ptr(), tally::parse_accuracy);
  if (nan_i < 0 || mode_i < 0) return nb::none();
  nb::object dtype = nb::steal(checked(PyObject_GetAttr(x.ptr(), st.dtype)));
  const auto it = st.plans.find({dtype.ptr(), op, nan_i, mode_i});
  if (it == st.plans.end()) return nb::bool_(false);
  const torch_plan& p = it->second;
  const std::uint64_t address = as_u64(nb::steal(checked(PyObject_CallMethodNoArgs(x.ptr(), st.data_ptr))).ptr());
  const std::uint64_t n = as_u64(nb::steal(checked(PyObject_CallMethodNoArgs(x.ptr(), st.numel))).ptr());
  nb::object stream = nb::steal(checked(PyObject_CallOneArg(st.raw_stream.ptr(), device.ptr())));
  nb::object buffer = reduce_into_new(reinterpret_cast<const void*>(address), n, p.dtype, p.op, p.opt,
                                      static_cast<std::uintptr_t>(as_u64(stream.ptr())), static_cast<int>(d), p.bytes);
  // The Result: object.__new__(cls) and its three per-call fields (the class holds the rest).
  auto* cls = reinterpret_cast<PyTypeObject*>(p.result.ptr());
  nb::object r = nb::steal(checked(cls->tp_alloc(cls, 0)));
  if (PyObject_SetAttr(r.ptr(), st.buffer, buffer.ptr()) != 0 || PyObject_SetAttr(r.ptr(), st.stream, stream.ptr()) != 0 ||
      PyObject_SetAttr(r.ptr(), st.keep, x.ptr()) != 0)
    throw nb::python_error();
  return r;
}

}  // namespace

void add_torch_path(nb::module_& m) {
  m.def(
      "_torch_setup",
      [](nb::object tensor_type, nb::object raw_stream) {
        torch_state& st = state();
        if (st.get_device == nullptr) {
          st.is_cuda = interned("is_cuda");
          st.get_device = interned("get_device");
          st.is_contiguous = interned("is_contiguous");
          st.data_ptr = interned("data_ptr");
          st.numel = interned("numel");
          st.dtype = interned("dtype");
          st.buffer = interned("_buffer");
          st.stream = interned("_stream");
          st.keep = interned("_keep");
        }
        if (!PyType_Check(tensor_type.ptr())) throw nb::type_error("_torch_setup: torch.Tensor, the class");
        st.tensor_type = std::move(tensor_type);
        st.raw_stream = std::move(raw_stream);
      },
      "tensor_type"_a, "raw_stream"_a);
  m.def(
      "_torch_plan_add",
      [](nb::object torch_dtype, int t, int o, int nan, int mode, std::size_t bytes, nb::object result) {
        if (t < 0 || t >= tally::kDtypeCount || o < 0 || o >= tally::kOpCount || nan < 0 || nan > 1 || mode < 0 ||
            mode > 2)
          throw nb::value_error("_torch_plan_add: an id out of range");
        if (!PyType_Check(result.ptr())) throw nb::type_error("_torch_plan_add: the result class");
        torch_state& st = state();
        tally::options opt;
        opt.nan = static_cast<tally::nan_policy>(nan);
        opt.mode = static_cast<tally::accuracy>(mode);
        opt.check_memory = false;  // torch describes the memory: device memory of the tensor's GPU
        const auto [it, added] = st.plans.insert_or_assign(
            {torch_dtype.ptr(), o, nan, mode},
            torch_plan{static_cast<tally::dtype>(t), static_cast<tally::op>(o), opt, bytes, std::move(result)});
        (void)it;
        if (added) st.keys.push_back(std::move(torch_dtype));  // the key's dtype object stays alive
      },
      "torch_dtype"_a, "dtype"_a, "op"_a, "nan"_a, "mode"_a, "bytes"_a, "result"_a);
  m.def("_torch_reduce", &torch_reduce, "x"_a.none(), "op"_a, "nan"_a.none(), "mode"_a.none());
}

}  // namespace tally_py
