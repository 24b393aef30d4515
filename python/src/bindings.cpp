// tally._tally: the Python package's native layer (nanobind). Thin: raw pointers (ints), dtype
// and op names, and the C++ API's calls; the array protocols (DLPack, __cuda_array_interface__,
// numpy), dtype mapping and argument checks live in python/tally/__init__.py. tally::error
// becomes tally.TallyError (a RuntimeError).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "native.hpp"
#include "tally/tally.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using tally_py::device_array;
using tally_py::device_guard;

tally::dtype dtype_of(const std::string& name) {
  const auto t = tally::parse_dtype(name);
  if (!t) throw nb::value_error(("unknown tally dtype '" + name + "'").c_str());
  return *t;
}
tally::op op_of(const std::string& name) {
  const auto o = tally::parse_op(name);
  if (!o) throw nb::value_error(("unknown op '" + name + "'").c_str());
  return *o;
}
tally::options options_of(const std::string& nan, const std::string& mode) {
  tally::options opt;
  const auto p = tally::parse_nan_policy(nan);
  if (!p) throw nb::value_error(("nan must be 'propagate' or 'ignore', not '" + nan + "'").c_str());
  const auto m = tally::parse_accuracy(mode);
  if (!m) throw nb::value_error(("mode must be 'fast', 'compensated' or 'exact', not '" + mode + "'").c_str());
  opt.nan = *p;
  opt.mode = *m;
  return opt;
}
// The per-call functions take dtype, op, nan policy and mode as the enums' values (the Python
// layer caches them per dtype and op): no strings to convert and parse on every call.
tally::dtype dtype_at(int t) {
  if (t < 0 || t >= tally::kDtypeCount) throw nb::value_error("tally: dtype id out of range");
  return static_cast<tally::dtype>(t);
}
tally::op op_at(int o) {
  if (o < 0 || o >= tally::kOpCount) throw nb::value_error("tally: op id out of range");
  return static_cast<tally::op>(o);
}
tally::options options_at(int nan, int mode, bool check) {
  if (nan < 0 || nan > 1 || mode < 0 || mode > 2) throw nb::value_error("tally: nan or mode id out of range");
  tally::options opt;
  opt.nan = static_cast<tally::nan_policy>(nan);
  opt.mode = static_cast<tally::accuracy>(mode);
  opt.check_memory = check;
  return opt;
}
const void* ptr(std::uintptr_t p) { return reinterpret_cast<const void*>(p); }
tally::stream_t stream_of(std::uintptr_t s) { return reinterpret_cast<tally::stream_t>(s); }

// A host value as a Python number: exact integers, floats, bools.
nb::object number(const tally::value& v) {
  switch (v.type) {
    case tally::dtype::b8: return nb::bool_(v.i != 0);
    case tally::dtype::u8:
    case tally::dtype::u16:
    case tally::dtype::u32:
    case tally::dtype::u64: return nb::int_(v.u);
    case tally::dtype::f32:
    case tally::dtype::f64: return nb::float_(v.f);
    default: return nb::int_(v.i);
  }
}

nb::dict stats_dict(const tally::stats& s) {
  nb::dict d;
  d["count"] = s.count;
  d["sum"] = s.sum;
  d["min"] = s.min;
  d["max"] = s.max;
  d["mean"] = s.mean;
  d["m2"] = s.m2;
  return d;
}


}  // namespace

NB_MODULE(_tally, m) {
  m.doc() = "tally's native layer; use the tally package";
  nb::exception<tally::error>(m, "TallyError", PyExc_RuntimeError);

  m.def("device_count", &tally::device_count);
  // The libtally this module runs with (the package ships its own): tally.__version__.
  m.attr("library_version") = tally::library_version().text;
  m.def("dtype_size", [](const std::string& t) { return tally::dtype_size(dtype_of(t)); });
  m.def("result_dtype", [](const std::string& t, const std::string& o) {
    return std::string(tally::to_string(tally::result_dtype(dtype_of(t), op_of(o))));
  });
  m.def("result_bytes", [](const std::string& t, const std::string& o) { return tally::result_bytes(dtype_of(t), op_of(o)); });
  m.def("dot_result_dtype", [](const std::string& t) { return std::string(tally::to_string(tally::dot_result_dtype(dtype_of(t)))); });
  m.def("why_unsupported", [](const std::string& t, const std::string& o, const std::string& nan, const std::string& mode) {
    return tally::why_unsupported(dtype_of(t), op_of(o), options_of(nan, mode));
  });

  m.def(
      "reduce_value",
      [](std::uintptr_t p, std::uint64_t n, const std::string& t, const std::string& o, const std::string& nan,
         const std::string& mode, std::uintptr_t stream, int device) {
        tally::value v;
        {
          const device_guard on(device);  // a device array's own GPU (-1: the current one)
          nb::gil_scoped_release unlocked;
          v = tally::reduce_value(ptr(p), n, dtype_of(t), op_of(o), stream_of(stream), options_of(nan, mode));
        }
        return nb::make_tuple(number(v), v.index);
      },
      "p"_a, "n"_a, "dtype"_a, "op"_a, "nan"_a = "propagate", "mode"_a = "fast", "stream"_a = 0, "device"_a = -1);
  m.def("dtype_id", [](const std::string& t) { return static_cast<int>(dtype_of(t)); });
  m.def("op_id", [](const std::string& o) { return static_cast<int>(op_of(o)); });
  m.def("nan_id", [](const std::string& nan) { return static_cast<int>(options_of(nan, "fast").nan); });
  m.def("mode_id", [](const std::string& mode) { return static_cast<int>(options_of("propagate", mode).mode); });
  // reduce into `out`. check = false skips the driver's pointer queries: only for an input that
  // a framework describes as device memory of the current GPU and a result buffer tally made.
  m.def(
      "reduce",
      [](std::uintptr_t p, std::uint64_t n, int t, int o, std::uintptr_t out, int nan, int mode, std::uintptr_t stream,
         int device, bool check) {
        const tally::options opt = options_at(nan, mode, check);
        const device_guard on(device);
        nb::gil_scoped_release unlocked;  // a host input streams through staging: seconds, maybe
        tally::reduce(ptr(p), n, dtype_at(t), op_at(o), reinterpret_cast<void*>(out), stream_of(stream), opt);
      },
      "p"_a, "n"_a, "dtype"_a, "op"_a, "out"_a, "nan"_a, "mode"_a, "stream"_a, "device"_a = -1, "check"_a = true);
  // The per-call path of tally.sum(x) and friends for a device array of a known GPU (device >= 0,
  // made current for the call) or of the current one (-1): a pooled result buffer of `bytes` and
  // the reduction into it, in one native call; the buffer is returned. Only enqueues, so the GIL
  // is kept (as torch does for its launches) unless the memory is checked (a host input streams).
  m.def(
      "reduce_new",
      [](std::uintptr_t p, std::uint64_t n, int t, int o, int nan, int mode, std::uintptr_t stream, int device,
         std::size_t bytes, bool check) {
        return tally_py::reduce_into_new(ptr(p), n, dtype_at(t), op_at(o), options_at(nan, mode, check), stream, device,
                                         bytes);
      },
      "p"_a, "n"_a, "dtype"_a, "op"_a, "nan"_a, "mode"_a, "stream"_a, "device"_a, "bytes"_a, "check"_a);
  // `count` calls of the C++ tally::reduce in a C++ loop (scripts/python-bench.py: the C++ call's
  // time in the same process, beside the Python call's).
  m.def(
      "_reduce_loop",
      [](std::uintptr_t p, std::uint64_t n, int t, int o, std::uintptr_t out, int nan, int mode, std::uintptr_t stream,
         bool check, int count) {
        const tally::options opt = options_at(nan, mode, check);
        const tally::dtype dt = dtype_at(t);
        const tally::op op = op_at(o);
        nb::gil_scoped_release unlocked;
        for (int i = 0; i < count; ++i)
          tally::reduce(ptr(p), n, dt, op, reinterpret_cast<void*>(out), stream_of(stream), opt);
      },
      "p"_a, "n"_a, "dtype"_a, "op"_a, "out"_a, "nan"_a, "mode"_a, "stream"_a, "check"_a, "count"_a);
  m.def(
      "dot_value",
      [](std::uintptr_t x, std::uintptr_t y, std::uint64_t n, const std::string& t, const std::string& mode,
         std::uintptr_t stream, int device) {
        const tally::options opt = options_of("propagate", mode);
        tally::value v;
        {
          const device_guard on(device);
          nb::gil_scoped_release unlocked;
          v = tally::dot_value(ptr(x), ptr(y), n, dtype_of(t), stream_of(stream), opt);
        }
        return number(v);
      },
      "x"_a, "y"_a, "n"_a, "dtype"_a, "mode"_a = "fast", "stream"_a = 0, "device"_a = -1);
  m.def(
      "dot",
      [](std::uintptr_t x, std::uintptr_t y, std::uint64_t n, const std::string& t, std::uintptr_t out,
         const std::string& mode, std::uintptr_t stream, int device) {
        const tally::options opt = options_of("propagate", mode);
        const device_guard on(device);
        nb::gil_scoped_release unlocked;
        tally::dot(ptr(x), ptr(y), n, dtype_of(t), reinterpret_cast<void*>(out), stream_of(stream), opt);
      },
      "x"_a, "y"_a, "n"_a, "dtype"_a, "out"_a, "mode"_a = "fast", "stream"_a = 0, "device"_a = -1);
  m.def(
      "stats_value",
      [](std::uintptr_t p, std::uint64_t n, const std::string& t, const std::string& nan, std::uintptr_t stream,
         int device) {
        const tally::options opt = options_of(nan, "fast");
        tally::stats s;
        {
          const device_guard on(device);
          nb::gil_scoped_release unlocked;
          s = tally::stats_value(ptr(p), n, dtype_of(t), stream_of(stream), opt);
        }
        return stats_dict(s);
      },
      "p"_a, "n"_a, "dtype"_a, "nan"_a = "propagate", "stream"_a = 0, "device"_a = -1);
  m.def(
      "reduce_axis",
      [](std::uintptr_t p, const std::vector<std::uint64_t>& dims, int axis, int count, int t, int o,
         std::uintptr_t out, int nan, int mode, std::uintptr_t stream, int device, bool check) {
        const tally::options opt = options_at(nan, mode, check);
        const device_guard on(device);
        nb::gil_scoped_release unlocked;
        tally::reduce_axis(ptr(p), dims.data(), static_cast<int>(dims.size()), axis, count, dtype_at(t), op_at(o),
                           reinterpret_cast<void*>(out), stream_of(stream), opt);
      },
      "p"_a, "dims"_a, "axis"_a, "count"_a, "dtype"_a, "op"_a, "out"_a, "nan"_a, "mode"_a, "stream"_a,
      "device"_a = -1, "check"_a = true);
  m.def(
      "stats_axis",
      [](std::uintptr_t p, const std::vector<std::uint64_t>& dims, int axis, int count, const std::string& t,
         std::uintptr_t out, const std::string& nan, std::uintptr_t stream, int device) {
        const tally::options opt = options_of(nan, "fast");
        const device_guard on(device);
        nb::gil_scoped_release unlocked;
        tally::stats_axis(ptr(p), dims.data(), static_cast<int>(dims.size()), axis, count, dtype_of(t),
                          reinterpret_cast<void*>(out), stream_of(stream), opt);
      },
      "p"_a, "dims"_a, "axis"_a, "count"_a, "dtype"_a, "out"_a, "nan"_a = "propagate", "stream"_a = 0,
      "device"_a = -1);
  // Ragged segments: segment s is elements [begin[s], end[s]) of the n at p (int64 offsets in
  // device memory of the same GPU; the Python layer uploads host offsets). Only enqueues: bad
  // offsets are found on the device and then nothing is written (check_segments says which).
  m.def(
      "reduce_segments",
      [](std::uintptr_t p, std::uint64_t n, std::uintptr_t begin, std::uintptr_t end, std::uint64_t segments, int t,
         int o, std::uintptr_t out, int nan, int mode, std::uintptr_t stream, int device, bool check) {
        const tally::options opt = options_at(nan, mode, check);
        const device_guard on(device);
        nb::gil_scoped_release unlocked;
        tally::reduce_segments(ptr(p), n, reinterpret_cast<const std::int64_t*>(begin),
                               reinterpret_cast<const std::int64_t*>(end), segments, dtype_at(t), op_at(o),
                               reinterpret_cast<void*>(out), stream_of(stream), opt);
      },
      "p"_a, "n"_a, "begin"_a, "end"_a, "segments"_a, "dtype"_a, "op"_a, "out"_a, "nan"_a, "mode"_a, "stream"_a,
      "device"_a = -1, "check"_a = true);
  m.def(
      "stats_segments",
      [](std::uintptr_t p, std::uint64_t n, std::uintptr_t begin, std::uintptr_t end, std::uint64_t segments,
         const std::string& t, std::uintptr_t out, const std::string& nan, std::uintptr_t stream, int device) {
        const tally::options opt = options_of(nan, "fast");
        const device_guard on(device);
        nb::gil_scoped_release unlocked;
        tally::stats_segments(ptr(p), n, reinterpret_cast<const std::int64_t*>(begin),
                              reinterpret_cast<const std::int64_t*>(end), segments, dtype_of(t),
                              reinterpret_cast<void*>(out), stream_of(stream), opt);
      },
      "p"_a, "n"_a, "begin"_a, "end"_a, "segments"_a, "dtype"_a, "out"_a, "nan"_a = "propagate", "stream"_a = 0,
      "device"_a = -1);
  // Blocking: throws TallyError naming the first segment whose offsets are bad.
  m.def(
      "check_segments",
      [](std::uintptr_t begin, std::uintptr_t end, std::uint64_t segments, std::uint64_t n, std::uintptr_t stream,
         int device) {
        const device_guard on(device);
        nb::gil_scoped_release unlocked;
        tally::check_segments(reinterpret_cast<const std::int64_t*>(begin), reinterpret_cast<const std::int64_t*>(end),
                              segments, n, stream_of(stream));
      },
      "begin"_a, "end"_a, "segments"_a, "n"_a, "stream"_a = 0, "device"_a = -1);
  // The results of count reductions at d (as reduce writes them) decoded on the host.
  m.def(
      "results_to_host",
      [](std::uintptr_t d, std::uint64_t count, const std::string& t, const std::string& o, std::uintptr_t stream,
         int device) {
        std::vector<tally::value> vs;
        {
          const device_guard on(device);  // the stream (0: the legacy one) is that GPU's
          nb::gil_scoped_release unlocked;
          vs = tally::results_to_values(ptr(d), count, dtype_of(t), op_of(o), stream_of(stream));
        }
        nb::list values, indices;
        for (const tally::value& v : vs) values.append(number(v)), indices.append(v.index);
        return nb::make_tuple(values, indices);
      },
      "d"_a, "count"_a, "dtype"_a, "op"_a, "stream"_a = 0, "device"_a = -1);
  m.def(
      "stats_to_host",
      [](std::uintptr_t d, std::uint64_t count, std::uintptr_t stream, int device) {
        std::vector<tally::stats> ss;
        {
          const device_guard on(device);
          nb::gil_scoped_release unlocked;
          ss = tally::stats_to_host(ptr(d), count, stream_of(stream));
        }
        nb::list out;
        for (const tally::stats& s : ss) out.append(stats_dict(s));
        return out;
      },
      "d"_a, "count"_a, "stream"_a = 0, "device"_a = -1);
  // Makes `consumer` wait for the work enqueued so far on `producer` (the CUDA array interface's
  // stream handshake); 0 is the legacy default stream. Both are streams of GPU `device` (made
  // current for the call; -1: the current one), where the event is made and recorded.
  m.def("stream_wait", [](std::uintptr_t producer, std::uintptr_t consumer, int device) {
    if (producer == consumer) return;
    const device_guard on(device);
    cudaEvent_t e = nullptr;
    auto ok = [](cudaError_t r, const char* what) {
      if (r != cudaSuccess) throw tally::error(std::string("tally: ") + what + " failed: " + cudaGetErrorString(r));
    };
    ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    const cudaError_t r1 = cudaEventRecord(e, reinterpret_cast<cudaStream_t>(producer));
    const cudaError_t r2 = r1 == cudaSuccess ? cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(consumer), e, 0) : r1;
    cudaEventDestroy(e);
    ok(r2, "making tally's stream wait for the producer's (cudaEventRecord / cudaStreamWaitEvent)");
  }, "producer"_a, "consumer"_a, "device"_a = -1);
  m.def("current_device", [] {
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess) (void)cudaGetLastError();
    return d;
  });

  nb::class_<device_array>(m, "DeviceBuffer")
      .def(nb::init<std::size_t, int, std::uintptr_t, bool>(), "bytes"_a, "device"_a = 0, "stream"_a = 0,
           "pooled"_a = true)
      .def("mark_exported", &device_array::mark_exported)
      .def_prop_ro("address", &device_array::address)
      .def_prop_ro("size", &device_array::size)
      .def_prop_ro("device", &device_array::device)
      .def("upload", &device_array::upload, "host"_a, "bytes"_a, "stream"_a = -1)
      // A DLPack-capable view of elements of `dtype` (a numpy-style code: 'f4', 'i8', ...).
      .def(
          "view",
          [](nb::handle self, const std::vector<std::size_t>& shape, const std::vector<std::int64_t>& strides,
             const std::string& code) {
            device_array& a = nb::cast<device_array&>(self);
            a.mark_exported();
            nb::dlpack::dtype dt{};
            const char kind = code.at(0);
            dt.code = static_cast<std::uint8_t>(kind == 'f'   ? nb::dlpack::dtype_code::Float
                                                : kind == 'i' ? nb::dlpack::dtype_code::Int
                                                : kind == 'u' ? nb::dlpack::dtype_code::UInt
                                                              : nb::dlpack::dtype_code::Bool);
            dt.bits = static_cast<std::uint8_t>(8 * std::stoi(code.substr(1)));
            dt.lanes = 1;
            // array_api: returned as nanobind's nb_ndarray, which has __dlpack__ / __dlpack_device__.
            return nb::ndarray<nb::array_api>(reinterpret_cast<void*>(a.address()), shape.size(), shape.data(), self,
                                              strides.data(), dt, nb::device::cuda::value, a.device());
          },
          "shape"_a, "strides"_a, "code"_a);

  tally_py::add_torch_path(m);
}
