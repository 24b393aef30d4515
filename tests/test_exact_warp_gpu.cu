// The warp-parallel normalisation and rounding (core/exact_warp.cuh) against the serial ones
// (core/exact.cuh): the same normalised words and the same rounded bits, on random accumulators,
// accumulators built from flushes, carries that ripple through every word, negative values and
// zero.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

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

}  // namespace
}  // namespace tally::test
