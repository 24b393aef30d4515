// Tuning candidates of argmax (CUB ArgMax) and dot (cuBLAS).
#include <memory>

#include "bench/competitors.cuh"
#include "bench/tune_shapes.cuh"

namespace tally::bench::tune {
namespace {

constexpr auto S = core::load_hint::stream;
constexpr auto G = core::load_hint::ldg;

#if TALLY_HAVE_CUBLAS
template <class T>
competitor cublas_dot(const sweep_buffers& b) {
  if (!cublas::available()) return {};  // no competitor: the group's rows have no ratio
  auto session = std::make_shared<competitors::cublas_session>(b.stream);
  return {sizeof(T) == 4 ? "cuBLAS Sdot" : "cuBLAS Ddot", [session, b](cudaStream_t, std::uint64_t n) {
            auto* x = static_cast<const T*>(b.d_in);
            auto* y = static_cast<const T*>(b.d_in2);
            auto* out = reinterpret_cast<T*>(static_cast<char*>(b.d_out) + 64 * 63);
            const auto nn = static_cast<std::int64_t>(n);
            if constexpr (sizeof(T) == 4)
              competitors::cublas_check(session->f.sdot(session->handle, nn, x, 1, y, 1, out), "cublasSdot_64");
            else
              competitors::cublas_check(session->f.ddot(session->handle, nn, x, 1, y, 1, out), "cublasDdot_64");
          }};
}
#else
template <class T>
competitor cublas_dot(const sweep_buffers&) {
  return {};
}
#endif

}  // namespace

std::vector<group> numerics_groups(const sweep_buffers& b) {
  std::vector<group> gs;
  {
    group g{"argmax", "f32", dtype::f32, -1.0, 1.0, 4, false, {}, {}, {20, 24, 26, 28, 30}};
    using Op = core::op_arg_packed<float, true, false>;
    int k = 0;
    g.candidates = {
        reduce_candidate<float, Op, 512, 4, S, 1>("512x4 mb1 acc4 stream", b, k++),
        reduce_candidate<float, Op, 512, 4, G, 1>("512x4 mb1 acc4 ldg", b, k++),
        reduce_candidate<float, Op, 512, 8, G, 2, 2>("512x8 mb2 acc2 ldg", b, k++),
        library_dynamic_candidate<float, Op>("dynamic (library base)", b, k++),
        dynamic_candidate<float, Op, 256, 16, G, 2>("dynamic 256x16 mb2", b, k++),
        library_dynamic_candidate<float, Op, core::depth::deep>("dynamic (library deep)", b, k++),
    };
    void* d_temp = b.d_temp;
    const std::size_t cap = b.temp_bytes;
    g.other = {"CUB ArgMax", [=](cudaStream_t s, std::uint64_t n) {
                 auto* in = static_cast<const float*>(b.d_in);
                 auto* v = reinterpret_cast<float*>(static_cast<char*>(b.d_out) + 64 * 63);
                 auto* i = reinterpret_cast<std::int64_t*>(static_cast<char*>(b.d_out) + 64 * 63 + 8);
                 std::size_t need = 0;
                 check(competitors::cub_arg<float>(op::argmax, nullptr, need, in, v, i, n, s), "cub temp size");
                 if (need > cap) throw tally::error("tune: CUB needs more temporary storage than the sweep has");
                 check(competitors::cub_arg<float>(op::argmax, d_temp, need, in, v, i, n, s), "CUB ArgMax");
               }};
    gs.push_back(std::move(g));
  }
  {
    group g{"dot", "f32", dtype::f32, 0.0, 1.0, 4, true, {}, {}, {20, 22, 24, 26, 28}};
    using Op = core::op_dot<float>;
    int k = 0;
    g.candidates = {
        reduce_candidate<float, Op, 1024, 4, S, 1>("1024x4 mb1 stream", b, k++),
        reduce_candidate<float, Op, 1024, 4, G, 1>("1024x4 mb1 ldg", b, k++),
        reduce_candidate<float, Op, 512, 4, G, 2>("512x4 mb2 ldg", b, k++),
        library_dynamic_candidate<float, Op>("dynamic (library base)", b, k++),
        dynamic_candidate<float, Op, 256, 8, G, 2>("dynamic 256x8 mb2", b, k++),
    };
    g.other = cublas_dot<float>(b);
    gs.push_back(std::move(g));
  }
  {
    group g{"dot", "f64", dtype::f64, 0.0, 1.0, 8, true, {}, {}, {19, 21, 23, 25, 27}};
    using Op = core::op_dot<double>;
    int k = 0;
    g.candidates = {
        reduce_candidate<double, Op, 512, 2, S, 1>("512x2 mb1 stream", b, k++),
        reduce_candidate<double, Op, 512, 2, G, 1>("512x2 mb1 ldg", b, k++),
        reduce_candidate<double, Op, 512, 4, G, 2>("512x4 mb2 ldg", b, k++),
    };
    g.other = cublas_dot<double>(b);
    gs.push_back(std::move(g));
  }
  return gs;
}

}  // namespace tally::bench::tune
