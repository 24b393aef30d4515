// Tuning candidates of the plain ops: sum f32/f64/i32, max f32, f16 sum, against CUB; the strided
// shapes and the dynamic schedule's kernels (tuning.hpp) side by side.
#include <memory>

#include "bench/competitors.cuh"
#include "bench/tune_shapes.cuh"

namespace tally::bench::tune {
namespace {

constexpr auto S = core::load_hint::stream;
constexpr auto G = core::load_hint::ldg;

// CUB's reduction of the group's data (temporary storage from the sweep's arena).
competitor cub_of(const char* name, op o, dtype t, const sweep_buffers& b) {
  void* d_temp = b.d_temp;
  const std::size_t temp = b.temp_bytes;
  return {name, [=](cudaStream_t s, std::uint64_t n) {
            std::size_t need = 0;
            check(competitors::cub_reduce(t, o, nullptr, need, b.d_in, static_cast<char*>(b.d_out) + 64 * 63, n, s),
                  "cub temp size");
            if (need > temp) throw tally::error("tune: CUB needs more temporary storage than the sweep has");
            check(competitors::cub_reduce(t, o, d_temp, need, b.d_in, static_cast<char*>(b.d_out) + 64 * 63, n, s),
                  name);
          }};
}

}  // namespace

std::vector<group> core_groups(const sweep_buffers& b) {
  std::vector<group> gs;
  {
    group g{"sum", "f32", dtype::f32, 0.0, 1.0, 4, false, {}, {}, {20, 24, 26, 28, 30}};
    using Op = core::op_sum<float>;
    int k = 0;
    g.candidates = {
        reduce_candidate<float, Op, 512, 4, S, 1>("512x4 mb1 stream", b, k++),
        reduce_candidate<float, Op, 512, 4, G, 1>("512x4 mb1 ldg", b, k++),
        reduce_candidate<float, Op, 512, 8, G, 2>("512x8 mb2 ldg", b, k++),
        reduce_candidate<float, Op, 1024, 4, G, 1>("1024x4 mb1 ldg", b, k++),
        library_dynamic_candidate<float, Op>("dynamic (library base)", b, k++),
        library_dynamic_candidate<float, Op, core::depth::deep>("dynamic (library deep)", b, k++),
        dynamic_candidate<float, Op, 256, 16, G, 2>("dynamic 256x16 mb2", b, k++),
    };
    g.other = cub_of("CUB Sum", op::sum, dtype::f32, b);
    gs.push_back(std::move(g));
  }
  {
    group g{"sum", "f64", dtype::f64, 0.0, 1.0, 8, false, {}, {}, {19, 23, 25, 27, 29}};
    using Op = core::op_sum<double>;
    int k = 0;
    g.candidates = {
        reduce_candidate<double, Op, 512, 8, S, 1>("512x8 mb1 acc8 stream", b, k++),
        reduce_candidate<double, Op, 512, 8, G, 1>("512x8 mb1 acc8 ldg", b, k++),
        reduce_candidate<double, Op, 512, 8, G, 2, 2>("512x8 mb2 acc2 ldg", b, k++),
        reduce_candidate<double, Op, 512, 4, G, 2, 4>("512x4 mb2 acc4 ldg", b, k++),
        library_dynamic_candidate<double, Op>("dynamic (library base)", b, k++),
        dynamic_candidate<double, Op, 256, 16, G, 2>("dynamic 256x16 mb2", b, k++),
        library_dynamic_candidate<double, Op, core::depth::deep>("dynamic (library deep)", b, k++),
    };
    g.other = cub_of("CUB Sum", op::sum, dtype::f64, b);
    gs.push_back(std::move(g));
  }
  {
    group g{"sum", "i32", dtype::i32, -1000.0, 1000.0, 4, false, {}, {}, {20, 24, 28, 30}};
    using Op = core::op_sum<std::int32_t>;
    int k = 0;
    g.candidates = {
        reduce_candidate<std::int32_t, Op, 512, 4, S, 1>("512x4 mb1 stream", b, k++),
        reduce_candidate<std::int32_t, Op, 512, 4, G, 1>("512x4 mb1 ldg", b, k++),
        reduce_candidate<std::int32_t, Op, 512, 8, G, 2>("512x8 mb2 ldg", b, k++),
        library_dynamic_candidate<std::int32_t, Op>("dynamic (library base)", b, k++),
        library_dynamic_candidate<std::int32_t, Op, core::depth::deep>("dynamic (library deep)", b, k++),
    };
    g.other = cub_of("CUB Sum", op::sum, dtype::i32, b);
    gs.push_back(std::move(g));
  }
  {
    group g{"max", "f32", dtype::f32, -1.0, 1.0, 4, false, {}, {}, {20, 24, 28, 30}};
    using Op = core::op_max<float>;
    int k = 0;
    g.candidates = {
        reduce_candidate<float, Op, 512, 4, S, 1>("512x4 mb1 stream", b, k++),
        reduce_candidate<float, Op, 512, 4, G, 1>("512x4 mb1 ldg", b, k++),
        reduce_candidate<float, Op, 512, 8, G, 2>("512x8 mb2 ldg", b, k++),
        library_dynamic_candidate<float, Op>("dynamic (library base)", b, k++),
        library_dynamic_candidate<float, Op, core::depth::deep>("dynamic (library deep)", b, k++),
        dynamic_candidate<float, Op, 256, 16, G, 2>("dynamic 256x16 mb2", b, k++),
    };
    g.other = cub_of("CUB Max", op::max, dtype::f32, b);
    gs.push_back(std::move(g));
  }
  {
    group g{"sum", "f16", dtype::f16, -1.0, 1.0, 2, false, {}, {}, {22, 24, 26, 28, 30}};
    using Op = core::op_sum<core::f16_t>;
    int k = 0;
    g.candidates = {
        reduce_candidate<core::f16_t, Op, 512, 8, S, 1>("512x8 mb1 stream", b, k++),
        reduce_candidate<core::f16_t, Op, 512, 8, G, 1>("512x8 mb1 ldg", b, k++),
        reduce_candidate<core::f16_t, Op, 512, 8, G, 2>("512x8 mb2 ldg", b, k++),
    };
    void* d_temp = b.d_temp;
    const std::size_t cap = b.temp_bytes;
    g.other = {"CUB TransformReduce (half to float)", [=](cudaStream_t s, std::uint64_t n) {
                 std::size_t need = 0;
                 auto* in = static_cast<const __half*>(b.d_in);
                 auto* out = reinterpret_cast<float*>(static_cast<char*>(b.d_out) + 64 * 63);
                 check(competitors::cub_half_sum<__half, competitors::half_to_float>(nullptr, need, in, out, n, s),
                       "cub temp size");
                 if (need > cap) throw tally::error("tune: CUB needs more temporary storage than the sweep has");
                 check(competitors::cub_half_sum<__half, competitors::half_to_float>(d_temp, need, in, out, n, s),
                       "CUB TransformReduce");
               }};
    gs.push_back(std::move(g));
  }
  return gs;
}

}  // namespace tally::bench::tune
