// The warp-parallel normalisation and rounding (core/exact_warp.cuh) against the serial ones
// (core/exact.cuh): the same normalised words and the same rounded bits, on random accumulators,
// accumulators built from flushes, carries that ripple through every word, negative values and
// zero. And the exact sum's certified warp merge (core/device_exact.cuh) against the exact value
// of its 32 expansions, added word by word on the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/device_exact.cuh"
#include "core/exact_warp.cuh"
#include "support.hpp"

namespace tally::test {
namespace {

namespace ex = tally::core::exact;

__global__ void normalize_round_kernel(const long long* in, long long* out, double* d, float* f,
                                       const unsigned* flags) {
  __shared__ long long w[ex::kWords];
  const long long* src = in + std::size_t(blockIdx.x) * ex::kWords;
  for (int k = threadIdx.x; k < ex::kWords; k += 32) w[k] = src[k];
  __syncwarp();
  ex::normalize_warp(w);
  const double rd = ex::round_warp<double>(w, flags[blockIdx.x]);
  const float rf = ex::round_warp<float>(w, flags[blockIdx.x]);
  for (int k = threadIdx.x; k < ex::kWords; k += 32) out[std::size_t(blockIdx.x) * ex::kWords + k] = w[k];
  if (threadIdx.x == 0) {
    d[blockIdx.x] = rd;
    f[blockIdx.x] = rf;
  }
}

std::vector<long long> random_words(std::mt19937_64& g, int kind) {
  std::vector<long long> w(ex::kWords, 0);
  switch (kind) {
    case 0:  // any signed words of up to 62 bits
      for (auto& x : w) x = static_cast<long long>(g() >> 2) * ((g() & 1) ? 1 : -1);
      w[ex::kWords - 1] >>= 20;
      break;
    case 1: {  // what the kernels build: flushes of random doubles
      std::uniform_int_distribution<int> e(1, 2046);
      for (int i = 0; i < 200; ++i) {
        const std::uint64_t b = (g() & 0x800fffffffffffffull) | (std::uint64_t(e(g)) << 52);
        double v;
        std::memcpy(&v, &b, sizeof v);
        ex::add(w.data(), v);
      }
      break;
    }
    case 2:  // a carry that ripples through every word: digits all ones, plus one at the bottom
      for (int k = 0; k + 1 < ex::kWords; ++k) w[k] = 0xffffffffll;
      w[0] += 1;
      break;
    case 3:  // a borrow that ripples: -1 at the bottom of zero digits with a positive top
      w[0] = -1;
      w[ex::kWords - 1] = 1;
      break;
    case 4:  // a small negative value in the middle
      w[70] = -5;
      w[40] = 123456789;
      break;
    default:  // zero
      break;
  }
  return w;
}

TEST(ExactWarpGpu, NormalizeAndRoundMatchSerial) {
  TALLY_REQUIRE_GPU();
  std::mt19937_64 g(test_seed());
  const int cases = 600;
  std::vector<long long> in, want_words;
  std::vector<unsigned> flags;
  std::vector<double> want_d;
  std::vector<float> want_f;
  for (int c = 0; c < cases; ++c) {
    std::vector<long long> w = random_words(g, c % 6);
    in.insert(in.end(), w.begin(), w.end());
    ex::normalize(w.data());
    want_words.insert(want_words.end(), w.begin(), w.end());
    const unsigned fl = c % 50 == 7 ? ex::kNaN : c % 50 == 8 ? ex::kNegInf : 0u;
    flags.push_back(fl);
    want_d.push_back(ex::round_to<double>(w.data(), fl));
    want_f.push_back(ex::round_to<float>(w.data(), fl));
  }
  device_buffer d_in(in.size() * 8), d_out(in.size() * 8), d_d(cases * 8), d_f(cases * 4), d_flags(cases * 4);
  d_in.upload(in.data(), in.size() * 8);
  d_flags.upload(flags.data(), flags.size() * 4);
  normalize_round_kernel<<<cases, 32>>>(static_cast<const long long*>(d_in.get()), static_cast<long long*>(d_out.get()),
                                        static_cast<double*>(d_d.get()), static_cast<float*>(d_f.get()),
                                        static_cast<const unsigned*>(d_flags.get()));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<long long> got_words(in.size());
  std::vector<double> got_d(cases);
  std::vector<float> got_f(cases);
  d_out.download(got_words.data(), got_words.size() * 8);
  d_d.download(got_d.data(), cases * 8);
  d_f.download(got_f.data(), cases * 4);
  for (int c = 0; c < cases; ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + " kind " + std::to_string(c % 6) + " seed " + std::to_string(test_seed()));
    ASSERT_EQ(0, std::memcmp(&got_words[std::size_t(c) * ex::kWords], &want_words[std::size_t(c) * ex::kWords],
                             ex::kWords * 8))
        << "normalised words";
    ASSERT_EQ(0, std::memcmp(&got_d[c], &want_d[c], 8)) << got_d[c] << " vs " << want_d[c];
    ASSERT_EQ(0, std::memcmp(&got_f[c], &want_f[c], 4)) << got_f[c] << " vs " << want_f[c];
  }
}

__global__ void certified_merge_kernel(const core::exact_acc* in, core::exact_acc* out, int* certified) {
  core::exact_acc v = in[std::size_t(blockIdx.x) * 32 + threadIdx.x];
  const bool ok = core::exact_warp_merge_certified(v);
  if (threadIdx.x == 0) {
    out[blockIdx.x] = v;
    certified[blockIdx.x] = ok ? 1 : 0;
  }
}

struct drop_flush {  // what a lane's fpe_add flushes is not the warp's
  __host__ __device__ void operator()(double) const {}
};

// One lane's expansion: fpe_add of a few values of the case's kind (what a thread's fold leaves:
// finite terms, |a0| < 2^1000, never -0; what fpe_add flushes is dropped, it is not the warp's).
core::exact_acc random_lane(std::mt19937_64& g, int kind) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  ex::fpe2 f{0.0, 0.0};
  unsigned flags = 0;
  const int count = kind == 6 ? 0 : 1 + int(g() % 8);
  for (int i = 0; i < count; ++i) {
    double x = 0.0;
    switch (kind) {
      case 0:  // the bench's data: uniform [-1, 1) in steps of 2^-52
        x = std::ldexp(double(std::int64_t(g() >> 11) - (std::int64_t(1) << 52)), -52);
        break;
      case 1:  // full 53-bit significands over 16 binades
        x = std::ldexp(u(g), int(g() % 17) - 8);
        break;
      case 2:  // 2^300 beside 2^-300: more than 94 binades in one warp, never certified
        x = std::ldexp(u(g), (g() & 1) ? 300 : -300);
        break;
      case 3:  // integers up to 2^53
        x = double(std::int64_t(g() >> 11) - (std::int64_t(1) << 52));
        break;
      case 4:  // subnormals and zeros
        x = (g() % 3 == 0) ? 0.0 : std::ldexp(double(std::int64_t(g() % (1u << 30)) - (1 << 29)), -1074);
        break;
      case 5:  // near the expansion's limit: steps of 2^979 below 2^990 (sums up to 2^993: m <= 994)
        x = std::ldexp(double(std::int64_t(g() % 4096) - 2048), 990 - 11);
        break;
      default:  // f32 values widened, as the narrow inputs' partials
        x = double(float(u(g) * 1000.0));
        break;
    }
    ex::fpe_add(f, x, flags, drop_flush{});
  }
  if ((g() % 97) == 0) flags |= ex::kNaN;
  return core::exact_acc{f.a0, f.a1, flags, core::kNoGrid};
}

// The certified merge's sum against the exact sum of the 32 lanes' terms (normalised words, equal
// word for word), the flags ORed, the limits of an expansion kept; ordinary data certify, a warp
// spanning 600 binades does not (and is then left to the step-by-step merge).
TEST(ExactWarpGpu, CertifiedMergeIsTheExactSum) {
  TALLY_REQUIRE_GPU();
  std::mt19937_64 g(test_seed());
  constexpr int kKinds = 8;
  const int random_cases = 8 * 400;
  std::vector<core::exact_acc> in;
  for (int c = 0; c < random_cases; ++c)
    for (int lane = 0; lane < 32; ++lane) in.push_back(random_lane(g, c % kKinds));
  // The test's edges, one warp each (the other lanes zero): m = 994 and m - g = 94 certify; m - g =
  // 95, and m = 995, do not.
  const double below_2_994 = std::nextafter(std::ldexp(1.0, 994), 0.0);  // m = 994, grid 941
  const double edges[3][2] = {{below_2_994, std::ldexp(1.0, 900)},    // g = 900: m - g = 94
                              {below_2_994, std::ldexp(1.0, 899)},    // m - g = 95
                              {std::ldexp(1.0, 994), 0.0}};           // m = 995
  for (const auto& e : edges)
    for (int lane = 0; lane < 32; ++lane)
      in.push_back(core::exact_acc{lane < 2 ? e[lane] : 0.0, 0.0, 0u, core::kNoGrid});
  const int cases = random_cases + 3;
  device_buffer d_in(in.size() * sizeof(core::exact_acc)), d_out(cases * sizeof(core::exact_acc)), d_ok(cases * 4);
  d_in.upload(in.data(), in.size() * sizeof(core::exact_acc));
  certified_merge_kernel<<<cases, 32>>>(static_cast<const core::exact_acc*>(d_in.get()),
                                        static_cast<core::exact_acc*>(d_out.get()), static_cast<int*>(d_ok.get()));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<core::exact_acc> out(cases);
  std::vector<int> ok(cases);
  d_out.download(out.data(), out.size() * sizeof(core::exact_acc));
  d_ok.download(ok.data(), ok.size() * 4);
  int certified[kKinds] = {};
  for (int c = 0; c < cases; ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + " kind " + std::to_string(c % kKinds) + " seed " +
                 std::to_string(test_seed()));
    if (!ok[c]) continue;
    if (c < random_cases) ++certified[c % kKinds];
    std::vector<long long> want(ex::kWords, 0), got(ex::kWords, 0);
    unsigned flags = 0;
    for (int lane = 0; lane < 32; ++lane) {
      const core::exact_acc& a = in[std::size_t(c) * 32 + lane];
      ex::add(want.data(), a.a0);
      ex::add(want.data(), a.a1);
      flags |= a.flags;
    }
    ex::add(got.data(), out[c].a0);
    ex::add(got.data(), out[c].a1);
    ex::normalize(want.data());
    ex::normalize(got.data());
    ASSERT_EQ(want, got) << "the merged (" << out[c].a0 << ", " << out[c].a1 << ") is not the warp's exact sum";
    ASSERT_EQ(out[c].flags, flags);
    ASSERT_TRUE(std::isfinite(out[c].a0) && std::isfinite(out[c].a1));
    ASSERT_LT(std::fabs(out[c].a0), ex::kFpeLimit);
    ASSERT_FALSE(std::signbit(out[c].a0) && out[c].a0 == 0.0) << "a -0 term";
    ASSERT_FALSE(std::signbit(out[c].a1) && out[c].a1 == 0.0) << "a -0 term";
  }
  EXPECT_EQ(ok[random_cases], 1) << "m = 994, m - g = 94: within the bound";
  EXPECT_EQ(ok[random_cases + 1], 0) << "m - g = 95 was certified";
  EXPECT_EQ(ok[random_cases + 2], 0) << "m = 995 was certified";
  const int per_kind = random_cases / kKinds;
  for (int k : {0, 1, 3, 4, 5, 6, 7}) EXPECT_EQ(certified[k], per_kind) << "kind " << k << ": ordinary data fell back";
  EXPECT_EQ(certified[2], 0) << "a warp spanning 600 binades was certified";
}

}  // namespace
}  // namespace tally::test
