// policy_choices: the shape choice of a representative op of each family, from the launchers
// themselves (a dry run that describes instead of launching), for `tally bench tune`.
#include "context.hpp"
#include "policy.hpp"

namespace tally::core {

std::vector<family_choice> policy_choices() {
  struct example {
    dtype t;
    kind k;
    const char* name;
    int log2n = 24;
  };
  // Each family at 2^24 (the strided kernel and its depth rule), and at 2^28 (1-2 GiB, past
  // eight times the L2 of the GPUs measured here: the dynamic schedules).
  const example examples[] = {
      {dtype::f32, kind::sum, "sum f32"},
      {dtype::f64, kind::sum, "sum f64"},
      {dtype::f16, kind::sum, "sum f16"},
      {dtype::i8, kind::sum, "sum i8"},
      {dtype::f32, kind::argmax, "argmax f32"},
      {dtype::f64, kind::argmax, "argmax f64"},
      {dtype::f32, kind::stats, "stats f32"},
      {dtype::f64, kind::stats, "stats f64"},
      {dtype::f32, kind::sum_comp, "compensated f32"},
      {dtype::f32, kind::dot, "dot f32"},
      {dtype::f64, kind::dot, "dot f64"},
      {dtype::f32, kind::sum_exact, "exact sum f32"},
      {dtype::f64, kind::sum_exact, "exact sum f64"},
      {dtype::f32, kind::sum, "sum f32, 2^28", 28},
      {dtype::f32, kind::argmax, "argmax f32, 2^28", 28},
      {dtype::f32, kind::stats, "stats f32, 2^28", 28},
      {dtype::f32, kind::sum_comp, "compensated f32, 2^28", 28},
      {dtype::f32, kind::dot, "dot f32, 2^28", 28},
      {dtype::f32, kind::sum_exact, "exact sum f32, 2^28", 28},
      {dtype::f64, kind::sum_exact, "exact sum f64, 2^28", 28},
  };
  const device_context& dev = current_context();
  std::vector<family_choice> out;
  for (const example& e : examples) {
    family_choice fc;
    fc.example = e.name;
    launch_ctx c{&dev, nullptr, nullptr, true};
    c.describe = &fc;
    if (launch_fn fn = find_launcher(e.t, e.k)) fn(nullptr, std::uint64_t(1) << e.log2n, nullptr, c);
    out.push_back(fc);
  }
  return out;
}

}  // namespace tally::core
