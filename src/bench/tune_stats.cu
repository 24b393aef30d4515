// Tuning candidates of the fused statistics (f32, f64), each timed against the fast sum.
#include "bench/tune_shapes.cuh"
#include "core/ops_stats.cuh"

namespace tally::bench::tune {
namespace {

constexpr auto G = core::load_hint::ldg;

}  // namespace

std::vector<group> stats_groups(const sweep_buffers& b) {
  std::vector<group> gs;
  {
    group g{"stats", "f32", dtype::f32, -1.0, 1.0, 4, false, {}, {}, {10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}};
    using Op = core::op_stats<float, false>;
    int k = 0;
    candidate fast = reduce_candidate<float, core::op_sum<float>, 512, 4, G, 1>("fast sum 512x4 mb1", b, k++);
    fast.reference = true;
    g.candidates = {
        fast,
        reduce_candidate<float, Op, 512, 4, G, 1>("512x4 mb1 acc2", b, k++),
        reduce_candidate<float, Op, 512, 8, G, 1>("512x8 mb1 acc2", b, k++),
        reduce_candidate<float, Op, 512, 4, G, 2, 1>("512x4 mb2 acc1", b, k++),
        // Half the warps: shorter block trees for the small sizes' single block and last block.
        reduce_candidate<float, Op, 256, 4, G, 2>("256x4 mb2 acc2", b, k++),
        reduce_candidate<float, Op, 256, 8, G, 1>("256x8 mb1 acc2", b, k++),
        // A quarter of the warps (the small sizes' single block).
        reduce_candidate<float, Op, 128, 8, G, 4>("128x8 mb4 acc2", b, k++),
    };
    gs.push_back(std::move(g));
  }
  {
    group g{"stats", "f64", dtype::f64, -1.0, 1.0, 8, false, {}, {}, {10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 29}};
    using Op = core::op_stats<double, false>;
    int k = 0;
    candidate fast = reduce_candidate<double, core::op_sum<double>, 512, 8, G, 1>("fast sum 512x8 mb1", b, k++);
    fast.reference = true;
    g.candidates = {
        fast,
        reduce_candidate<double, Op, 512, 8, G, 1>("512x8 mb1 acc2", b, k++),
        reduce_candidate<double, Op, 512, 4, G, 2, 1>("512x4 mb2 acc1", b, k++),
        reduce_candidate<double, Op, 256, 8, G, 1>("256x8 mb1 acc2", b, k++),
        reduce_candidate<double, Op, 256, 4, G, 2>("256x4 mb2 acc2", b, k++),
        reduce_candidate<double, Op, 128, 8, G, 4>("128x8 mb4 acc2", b, k++),
    };
    gs.push_back(std::move(g));
  }
  return gs;
}

}  // namespace tally::bench::tune
