// The head start (src/chunked/head_start): the host's cores and the GPU sharing a produced stream,
// exactly. Against the device path's exact reduce (the same bits), the independent reference,
// with the host made to take a large share (TALLY_HEAD_START_MIN_MIB) and none, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "chunked/head_start.hpp"
#include "numerics_reference.hpp"
#include "support.hpp"
#include "tally/tally.hpp"

namespace tally::test {
namespace {

using namespace ref;

// A producer reading a host array (several threads at once), failing at element fail_at.
struct array_source {
  const unsigned char* data = nullptr;
  std::size_t elem = 0;
  std::uint64_t fail_at = ~std::uint64_t(0);
};
void fill_array(void* context, int, void* dst, std::uint64_t first, std::uint64_t count) {
  const auto* a = static_cast<const array_source*>(context);
  if (first <= a->fail_at && a->fail_at < first + count) throw std::runtime_error("the producer failed on purpose");
  std::memcpy(dst, a->data + first * a->elem, count * a->elem);
}

// TALLY_HEAD_START_MIN_MIB: the host goes on to at least this much after the GPU is ready.
struct host_takes_at_least : scoped_env {
  explicit host_takes_at_least(const char* mib) : scoped_env("TALLY_HEAD_START_MIN_MIB", mib) {}
};
// MIN and MAX both: the host takes exactly the first `mib` MiB, the GPU the rest.
struct host_takes_exactly {
  scoped_env lo, hi;
  explicit host_takes_exactly(const char* mib) : lo("TALLY_HEAD_START_MIN_MIB", mib), hi("TALLY_HEAD_START_MAX_MIB", mib) {}
};

// host_min: the host's share must be at least this many elements (from the MIN knob).
template <class T>
void matches_device_exact(std::uint64_t n, std::uint32_t seed, std::uint64_t host_min = 0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<T> h(n);
  const int span = is_half_v<T> ? 6 : 20;  // within float16's range
  for (auto& x : h) x = make<T>(std::ldexp(nd(g), static_cast<int>(g() % (2 * span)) - span));
  const dtype t = dtype_of<T>();
  const device_buffer d = to_device(h);
  options ex;
  ex.mode = accuracy::exact;
  array_source src{reinterpret_cast<const unsigned char*>(h.data()), sizeof(T)};
  for (op o : {op::sum, op::mean}) {
    const value want = reduce_value(d.get(), n, t, o, nullptr, ex);
    for (accuracy mode : {accuracy::fast, accuracy::compensated, accuracy::exact}) {
      chunked::spec s{chunked::what::reduce, t, o, {}};
      s.opt.mode = mode;
      chunked::head_start_report rep;
      std::uint64_t last = 0;
      const value got = chunked::reduce_with_head_start(s, n, fill_array, &src, 0,
                                                        [&](std::uint64_t done) { last = done; }, &rep);
      SCOPED_TRACE(std::string(to_string(t)) + " " + to_string(o) + " " + to_string(mode) + " n=" +
                   std::to_string(n) + " host share " + std::to_string(rep.host_elements));
      EXPECT_TRUE(got == want) << got.to_string() << " want " << want.to_string();
      EXPECT_LE(rep.host_elements, n);
      EXPECT_GE(rep.host_elements, std::min(n, host_min));
      if (rep.host_elements < n) {
        EXPECT_EQ(last, n);  // the GPU's last step reported
      }
    }
  }
  // The sum against the independent reference too, with the host reading the array in place.
  const exact_accumulator a = exact_sum(h.data(), n);
  chunked::spec s{chunked::what::reduce, t, op::sum, {}};
  for (const void* in_place : {static_cast<const void*>(nullptr), static_cast<const void*>(h.data())}) {
    const value got = chunked::reduce_with_head_start(s, n, fill_array, &src, 0, nullptr, nullptr, in_place);
    if (t == dtype::f64) EXPECT_EQ(bits_of(got.as_double()), bits_of(a.to_double()));
    else EXPECT_EQ(bits_of(static_cast<float>(got.as_double())), bits_of(a.to_float()));
  }
}

TEST(HeadStartGpu, HostAndGpuSharesGiveTheDevicesExactResult) {
  TALLY_REQUIRE_GPU();
  // With CUDA already started in this process the GPU is ready at once: the host takes little.
  matches_device_exact<float>(3000001, test_seed() + 1);
  matches_device_exact<double>(1000003, test_seed() + 2);
}

TEST(HeadStartGpu, ALargeHostShareChangesNothing) {
  TALLY_REQUIRE_GPU();
  {
    const host_takes_at_least four("4");  // 4 MiB: a split inside the data for every dtype below
    matches_device_exact<float>(3000001, test_seed() + 3, (4u << 20) / 4);
    matches_device_exact<double>(1000003, test_seed() + 4, (4u << 20) / 8);
    matches_device_exact<f16>(3000017, test_seed() + 5, (4u << 20) / 2);
    matches_device_exact<bf16>(3000019, test_seed() + 6, (4u << 20) / 2);
  }
  {
    const host_takes_exactly four("4");  // the host the first 4 MiB, the GPU the rest, for sure
    matches_device_exact<float>(3000001, test_seed() + 15, (4u << 20) / 4);
  }
  const host_takes_at_least all("1024");  // the host takes everything, the GPU nothing
  matches_device_exact<float>(1000, test_seed() + 7, 1000);
  matches_device_exact<float>(1, test_seed() + 8, 1);
}

// TALLY_HEAD_START_SHARE=1: the host and the GPU claim pieces from one counter to the end, so the
// shares interleave (the host's 1 MiB pieces between the GPU's 64 MiB groups).
TEST(HeadStartGpu, SharedToTheEndChangesNothing) {
  TALLY_REQUIRE_GPU();
  const scoped_env share("TALLY_HEAD_START_SHARE", "1");
  matches_device_exact<float>(50000017, test_seed() + 9);  // 200 MB: several GPU groups
  matches_device_exact<double>(1000003, test_seed() + 10);
  matches_device_exact<bf16>(3000019, test_seed() + 11);
  {
    const scoped_env one("TALLY_HEAD_START_SHARE_THREADS", "1");  // one host thread on after the GPU is ready
    matches_device_exact<float>(50000017, test_seed() + 16);
  }
  std::vector<float> h(4u << 20, 1.0f);
  array_source src{reinterpret_cast<const unsigned char*>(h.data()), 4};
  src.fail_at = h.size() - 10;
  const chunked::spec s{chunked::what::reduce, dtype::f32, op::sum, {}};
  EXPECT_NE(error_of_any([&] { (void)chunked::reduce_with_head_start(s, h.size(), fill_array, &src, 0, nullptr); })
                .find("failed on purpose"),
            std::string::npos);
}

TEST(HeadStartGpu, SpecialValuesAndEmptyInput) {
  TALLY_REQUIRE_GPU();
  const host_takes_exactly four("4");
  const std::uint64_t n = 3u << 20;  // 12 MiB of f32: the host the first 4 MiB, the GPU the rest
  std::vector<float> h(n, 0.5f);
  array_source src{reinterpret_cast<const unsigned char*>(h.data()), 4};
  const chunked::spec s{chunked::what::reduce, dtype::f32, op::sum, {}};
  EXPECT_EQ(chunked::reduce_with_head_start(s, n, fill_array, &src, 0, nullptr).as_double(), n * 0.5);
  h[5] = INFINITY;  // in the host's share
  EXPECT_EQ(chunked::reduce_with_head_start(s, n, fill_array, &src, 0, nullptr).as_double(), INFINITY);
  h[n - 5] = -INFINITY;  // in the GPU's share: +inf and -inf make NaN
  EXPECT_TRUE(std::isnan(chunked::reduce_with_head_start(s, n, fill_array, &src, 0, nullptr).as_double()));
  h[5] = h[n - 5] = 0.5f;
  h[n - 7] = NAN;
  EXPECT_TRUE(std::isnan(chunked::reduce_with_head_start(s, n, fill_array, &src, 0, nullptr).as_double()));
  EXPECT_EQ(chunked::reduce_with_head_start(s, 0, fill_array, &src, 0, nullptr).as_double(), 0.0);
  const chunked::spec mean{chunked::what::reduce, dtype::f32, op::mean, {}};
  EXPECT_TRUE(std::isnan(chunked::reduce_with_head_start(mean, 0, fill_array, &src, 0, nullptr).as_double()));
}

TEST(HeadStartGpu, AProducersErrorOnEitherSideStopsItAndNothingBreaks) {
  TALLY_REQUIRE_GPU();
  const host_takes_exactly four("4");
  const std::uint64_t n = 4u << 20;  // 16 MiB of f32
  std::vector<float> h(n, 1.0f);
  array_source src{reinterpret_cast<const unsigned char*>(h.data()), 4};
  const chunked::spec s{chunked::what::reduce, dtype::f32, op::sum, {}};
  for (std::uint64_t at : {std::uint64_t(10), n - 10}) {  // the host's share, the GPU's
    src.fail_at = at;
    std::string why;
    try {
      (void)chunked::reduce_with_head_start(s, n, fill_array, &src, 0, nullptr);
    } catch (const std::exception& e) {
      why = e.what();
    }
    EXPECT_NE(why.find("failed on purpose"), std::string::npos) << at << ": " << why;
  }
  src.fail_at = ~std::uint64_t(0);
  EXPECT_EQ(chunked::reduce_with_head_start(s, n, fill_array, &src, 0, nullptr).as_double(), static_cast<double>(n));
  EXPECT_EQ(reduce_value(h.data(), n, dtype::f32, op::sum).as_double(), static_cast<double>(n));
}

TEST(HeadStartGpu, ABadDeviceIsRefusedByName) {
  TALLY_REQUIRE_GPU();
  std::vector<float> h(1000, 1.0f);
  array_source src{reinterpret_cast<const unsigned char*>(h.data()), 4};
  const chunked::spec s{chunked::what::reduce, dtype::f32, op::sum, {}};
  const std::string why = error_of([&] { (void)chunked::reduce_with_head_start(s, 1000, fill_array, &src, 999, nullptr); });
  EXPECT_NE(why.find("head start's GPU"), std::string::npos) << why;
  EXPECT_EQ(chunked::reduce_with_head_start(s, 1000, fill_array, &src, 0, nullptr).as_double(), 1000.0);
}

// TALLY_HOST_SHARE=1: reduce_value of pageable memory of 64 MiB or more shares the array between
// the host's cores and the GPU; every mode then gives the device's exact result. Below 64 MiB,
// and for other ops, the staged path as before.
template <class T>
void host_share_matches(std::uint64_t n, std::uint32_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<T> h(n);
  for (auto& x : h) x = make<T>(nd(g) * 100);
  const dtype t = dtype_of<T>();
  const device_buffer d = to_device(h);
  options ex;
  ex.mode = accuracy::exact;
  for (op o : {op::sum, op::mean}) {
    const value want = reduce_value(d.get(), n, t, o, nullptr, ex);
    for (accuracy mode : {accuracy::fast, accuracy::exact}) {
      options opt;
      opt.mode = mode;
      const value got = reduce_value(h.data(), n, t, o, nullptr, opt);
      EXPECT_TRUE(got == want) << to_string(t) << " " << to_string(o) << " " << to_string(mode) << ": "
                               << got.to_string() << " want " << want.to_string();
    }
  }
  // An op the host does not take: the staged path, the device's result.
  EXPECT_TRUE(reduce_value(h.data(), n, t, op::max) == reduce_value(d.get(), n, t, op::max));
}

TEST(HeadStartGpu, HostShareOfPageableArrays) {
  TALLY_REQUIRE_GPU();
  const scoped_env share("TALLY_HOST_SHARE", "1");
  host_share_matches<float>((std::uint64_t(64) << 20) / 4 + 12345, test_seed() + 12);
  host_share_matches<double>((std::uint64_t(64) << 20) / 8 + 7, test_seed() + 13);
  host_share_matches<bf16>((std::uint64_t(64) << 20) / 2 + 1, test_seed() + 14);
  // Below 64 MiB: the staged fast sum (close to, not necessarily equal to, the exact sum).
  std::vector<float> small(1000, 0.1f);
  EXPECT_NEAR(reduce_value(small.data(), small.size(), dtype::f32, op::sum).as_double(), 100.0, 1e-3);
}

}  // namespace
}  // namespace tally::test
