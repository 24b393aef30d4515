// Tuning candidates of the exact sum (f32, f64) and the compensated sum, each timed against the
// fast sum in the same run.
#include "bench/tune_shapes.cuh"

namespace tally::bench::tune {
namespace {

constexpr auto G = core::load_hint::ldg;
using core::exact_form;

}  // namespace

std::vector<group> exact_groups(const sweep_buffers& b) {
  std::vector<group> gs;
  const std::vector<int> f32_sizes{10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}, f64_sizes{10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 29};
  {
    group g{"exact sum", "f32", dtype::f32, -1.0, 1.0, 4, false, {}, {}, f32_sizes};
    int k = 0;
    candidate fast = reduce_candidate<float, core::op_sum<float>, 512, 4, G, 1>("fast sum 512x4 mb1", b, k++);
    fast.reference = true;
    g.candidates = {
        fast,
        exact_candidate<float, exact_form::sum, 512, 4, G, 2, 2, false, false>("512x4 mb2 acc2 per-element test, strided", b, k++),
        exact_candidate<float, exact_form::sum, 512, 4, G, 2, 2>("512x4 mb2 acc2", b, k++),
        exact_candidate<float, exact_form::sum, 512, 8, G, 1, 2, true, false>("512x8 mb1 acc2 strided", b, k++),
        exact_candidate<float, exact_form::sum, 512, 8, G, 1, 2>("512x8 mb1 acc2", b, k++),
        exact_candidate<float, exact_form::sum, 256, 8, G, 2, 2>("256x8 mb2 acc2", b, k++),
        // Small inputs on one block: one expansion a thread (no merge of two before the block's
        // tree), and fewer warps in the tree.
        exact_candidate<float, exact_form::sum, 512, 4, G, 2, 1, false, false>("512x4 mb2 acc1 per-element test, strided", b, k++),
        exact_candidate<float, exact_form::sum, 256, 4, G, 2, 2, false, false>("256x4 mb2 acc2 per-element test, strided", b, k++),
        exact_candidate<float, exact_form::sum, 128, 8, G, 4, 2, false, false>("128x8 mb4 acc2 per-element test, strided", b, k++),
    };
    gs.push_back(std::move(g));
  }
  {
    group g{"exact sum", "f64", dtype::f64, -1.0, 1.0, 8, false, {}, {}, f64_sizes};
    int k = 0;
    candidate fast = reduce_candidate<double, core::op_sum<double>, 512, 8, G, 1>("fast sum 512x8 mb1", b, k++);
    fast.reference = true;
    g.candidates = {
        fast,
        exact_candidate<double, exact_form::sum, 512, 4, G, 2, 2, true, false>("512x4 mb2 acc2 strided", b, k++),
        exact_candidate<double, exact_form::sum, 512, 4, G, 2, 2>("512x4 mb2 acc2", b, k++),
        exact_candidate<double, exact_form::sum, 512, 8, G, 1, 2>("512x8 mb1 acc2", b, k++),
        exact_candidate<double, exact_form::sum, 256, 4, G, 2, 2, false, false>("256x4 mb2 acc2 strided", b, k++),
    };
    gs.push_back(std::move(g));
  }
  {
    group g{"compensated sum", "f32", dtype::f32, -1.0, 1.0, 4, false, {}, {}, {10, 16, 20, 22, 24, 26, 28, 30}};
    using Op = core::op_sum_comp<float>;
    int k = 0;
    candidate fast = reduce_candidate<float, core::op_sum<float>, 512, 4, G, 1>("fast sum 512x4 mb1", b, k++);
    fast.reference = true;
    g.candidates = {
        fast,
        reduce_candidate<float, Op, 512, 4, G, 1>("512x4 mb1 acc8", b, k++),
        reduce_candidate<float, Op, 512, 4, G, 2, 4>("512x4 mb2 acc4", b, k++),
    };
    gs.push_back(std::move(g));
  }
  return gs;
}

}  // namespace tally::bench::tune
