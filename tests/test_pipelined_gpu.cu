// The pipelined rounds of the core's block loop (core/device.cuh, reduce_block_range with PIPE:
// the next round's loads issued before this round folds) against the plain loop: every block's
// accumulator bitwise the same, for the statistics of f64 (the op with a pipelined kernel) and of
// f32 (the loop with four elements a vector), under both NaN policies, at sizes from no whole
// round to several, with a misaligned start (a scalar head) and a ragged tail. Small grids, so
// that a few thousand elements already make several rounds a thread.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/device.cuh"
#include "core/ops_stats.cuh"
#include "support.hpp"

namespace tally::test {
namespace {

constexpr int kBlock = 512, kUnroll = 8;

template <class T, class Op, bool PIPE>
__global__ void __launch_bounds__(kBlock, 1) block_range_kernel(const T* in, std::uint64_t n,
                                                                 typename Op::acc_type* out) {
  const auto v = core::reduce_block_range<T, Op, kBlock, kUnroll, core::load_hint::ldg, core::layout::strided, 8, PIPE>(
      in, n, blockIdx.x, gridDim.x);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

template <class T, class Op, bool PIPE>
std::vector<unsigned char> block_accs(const T* d_in, std::uint64_t n, unsigned blocks) {
  using Acc = typename Op::acc_type;
  Acc* d_out = nullptr;
  EXPECT_EQ(cudaMalloc(&d_out, blocks * sizeof(Acc)), cudaSuccess);
  EXPECT_EQ(cudaMemset(d_out, 0, blocks * sizeof(Acc)), cudaSuccess);
  block_range_kernel<T, Op, PIPE><<<blocks, kBlock>>>(d_in, n, d_out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned char> h(blocks * sizeof(Acc));
  EXPECT_EQ(cudaMemcpy(h.data(), d_out, h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaFree(d_out), cudaSuccess);
  return h;
}

template <class T, class Op>
void check_pipelined(const char* what) {
  std::mt19937_64 g(test_seed());
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (unsigned blocks : {1u, 3u}) {
    const std::uint64_t round = std::uint64_t(blocks) * kBlock * kUnroll * (16 / sizeof(T));  // elements
    for (std::uint64_t n : {std::uint64_t(0), std::uint64_t(37), round - 1, round, round + 5, 2 * round + 17,
                            3 * round, 5 * round + 1234, 6 * round + round / 2}) {
      // One element more than n, the input starting one element in: a scalar head as well.
      std::vector<T> h(n + 1);
      for (auto& x : h) x = static_cast<T>(1e3 + u(g));
      if (n > 100) h[1 + n / 3] = std::numeric_limits<T>::quiet_NaN();  // the policies differ here
      T* d = nullptr;
      ASSERT_EQ(cudaMalloc(&d, h.size() * sizeof(T)), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
      const auto plain = block_accs<T, Op, false>(d + 1, n, blocks);
      const auto piped = block_accs<T, Op, true>(d + 1, n, blocks);
      ASSERT_EQ(cudaFree(d), cudaSuccess);
      EXPECT_EQ(std::memcmp(plain.data(), piped.data(), plain.size()), 0)
          << what << ": n = " << n << ", " << blocks << " blocks, rounds " << double(n) / double(round);
    }
  }
}

TEST(PipelinedGpu, StatsRoundsMatchThePlainLoopBitwise) {
  TALLY_REQUIRE_GPU();
  check_pipelined<float, core::op_stats<float, false>>("stats f32");
  check_pipelined<float, core::op_stats<float, true>>("stats f32, NaNs ignored");
  check_pipelined<double, core::op_stats<double, false>>("stats f64");
  check_pipelined<double, core::op_stats<double, true>>("stats f64, NaNs ignored");
}

// Which kernels have a pipelined twin (compile-time): the f64 statistics in one-block-an-SM
// shapes; not the f32 or integer statistics, not the other ops, not two-blocks-an-SM shapes.
static_assert(core::pipelined_v<core::op_stats<double, false>> && core::pipelined_v<core::op_stats<double, true>>);
static_assert(!core::pipelined_v<core::op_stats<float, false>> && !core::pipelined_v<core::op_stats<std::int64_t, false>>);
static_assert(!core::pipelined_v<core::op_sum<double>> && !core::pipelined_v<core::op_sum_comp<double>>);
static_assert(core::pipelines_v<double, core::op_stats<double, false>, 1, core::layout::strided> &&
              !core::pipelines_v<double, core::op_stats<double, false>, 2, core::layout::strided>);

}  // namespace
}  // namespace tally::test
