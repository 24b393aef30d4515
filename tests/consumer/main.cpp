// The consumer of the installed package: links tally::tally and, with a GPU, sums 1000 x 0.5 on
// it (500, exactly). Without a GPU it only shows the library links and loads.
#include <tally/tally.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::printf("tally from the installed package: %s\n", tally::to_string(tally::dtype::bf16));
  if (tally::device_count() == 0) {
    std::printf("no GPU here: linked and loaded, nothing to reduce\n");
    return 0;
  }
  const std::vector<float> h(1000, 0.5f);
  tally::device_buffer d(h.size() * sizeof(float));
  d.upload(h.data(), h.size() * sizeof(float));
  const tally::value v = tally::reduce_value(d.get(), h.size(), tally::dtype::f32, tally::op::sum);
  std::printf("sum of 1000 x 0.5 = %s\n", v.to_string().c_str());
  return v.as_double() == 500.0 ? 0 : 1;
}
