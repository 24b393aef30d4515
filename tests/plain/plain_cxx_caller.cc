// Compiled by g++ with only include/ on the path: proves tally.hpp needs no CUDA headers, and
// exercises the API the way a plain C++ caller would. Exit 77 = skipped (no GPU).
#include <tally/dist.hpp>  // plain C++ too (libtally_dist is not linked here)
#include <tally/tally.hpp>

#include <cstdio>
#include <vector>

int main() {
  if (tally::device_count() == 0) {
    try {
      tally::current_device();
      std::puts("expected tally::error without a GPU");
      return 1;
    } catch (const tally::error& e) {
      std::printf("skipped (no GPU): %s\n", e.what());
      return 77;
    }
  }
  std::vector<float> h(1000, 0.5f);
  tally::device_buffer d(h.size() * sizeof(float));
  d.upload(h.data(), h.size() * sizeof(float));
  const tally::value v = tally::reduce_value(d.get(), h.size(), tally::dtype::f32, tally::op::sum);
  std::printf("plain C++ caller: sum of 1000 x 0.5 = %s\n", v.to_string().c_str());
  return v.type == tally::dtype::f32 && v.as_double() == 500.0 ? 0 : 1;
}
