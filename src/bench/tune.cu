#include "bench/tune.hpp"

#include <cooperative_groups.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "core/device.cuh"

namespace tally::bench {
namespace {

namespace cg = cooperative_groups;
using core::load_hint;

// Cluster variant: CS blocks of one cluster each reduce a range, then write their partial into
// rank 0's shared memory (distributed shared memory); rank 0 finishes. No global atomics.
template <class T, class Op, int BLOCK, int UNROLL>
__global__ void __launch_bounds__(BLOCK) cluster_kernel(core::reduce_args<T, Op> a) {
  using Acc = typename Op::acc_type;
  __shared__ Acc partials[16];
  core::pdl_wait();
  core::pdl_launch_dependents();
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
  const Acc v = core::reduce_block_range<T, Op, BLOCK, UNROLL, load_hint::stream, core::layout::contiguous>(
      a.d_in, a.n, rank, size);
  if (threadIdx.x == 0) *cluster.map_shared_rank(&partials[rank], 0) = v;
  cluster.sync();
  if (rank == 0 && threadIdx.x < 32) {
    Acc p = threadIdx.x < size ? partials[threadIdx.x] : Op::identity();
    p = core::warp_reduce<Op>(p);
    if (threadIdx.x == 0) *a.d_out = Op::finalize(p);
  }
}

struct launch_shape {
  unsigned blocks;
  bool pdl;
  int cluster;  // 0: plain grid
};

template <class K, class Args>
cudaError_t launch_k(K kernel, int block, const launch_shape& sh, cudaStream_t s, const Args& args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(sh.blocks);
  cfg.blockDim = dim3(block);
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  int na = 0;
  if (sh.pdl) {
    attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  if (sh.cluster) {
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = sh.cluster;
    attr[na].val.clusterDim.y = 1;
    attr[na].val.clusterDim.z = 1;
    ++na;
  }
  cfg.attrs = attr;
  cfg.numAttrs = na;
  return cudaLaunchKernelEx(&cfg, kernel, args);
}

// Per-call time of `launch` from graph replay (the GPU-side cost) and from a stream batch.
struct tt {
  double graph_us, stream_us;
};
tt time_launch(const std::function<void(cudaStream_t)>& launch, cudaStream_t s, int batch, int reps) {
  std::vector<call_fn> c = {[&](cudaStream_t st, std::uint64_t) { launch(st); }};
  timing_plan p;
  p.per_call_reps = 5;
  p.batch_reps = reps;
  p.max_batch = batch;
  p.min_batch = std::min(batch, 10);
  p.batch_budget_us = 30000;
  const auto t = time_interleaved(c, s, 1, p);
  return {t[0].graph_us, t[0].stream_us};
}

template <class T, class Op>
struct sweep_ctx {
  const T* d_in;
  typename Op::out_type* d_out;
  typename Op::acc_type* d_partials;
  unsigned* d_counter;
  cudaStream_t s;
  int sms;
};

using core::layout;

template <class T>
const char* dname() {
  return sizeof(T) == 8 ? "f64" : (std::is_integral_v<T> ? "i32" : "f32");
}

template <class T, class Op, int BLOCK, int UNROLL, load_hint H, layout L, int MINB>
void large_sweep(const sweep_ctx<T, Op>& c, std::uint64_t n, table& tab, bool quick,
                 const std::function<void(const std::string&)>& progress) {
  auto kernel = core::reduce_kernel<T, Op, BLOCK, UNROLL, H, L, MINB>;
  int occ = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, BLOCK, 0), "occupancy");
  for (int per_sm = 1; per_sm <= occ; per_sm = per_sm < occ && per_sm * 2 > occ ? occ : per_sm * 2) {
    if (per_sm > 1 && per_sm < occ && quick) continue;
    const launch_shape sh{unsigned(per_sm * c.sms), true, 0};
    core::reduce_args<T, Op> a{c.d_in, n, c.d_out, c.d_partials, c.d_counter};
    const tt t = time_launch([&](cudaStream_t s) { check(launch_k(kernel, BLOCK, sh, s, a), "launch"); },
                             c.s, quick ? 5 : 10, quick ? 3 : 7);
    json row;
    row["dtype"] = dname<T>();
    row["n"] = n;
    row["layout"] = L == layout::strided ? "strided" : "contiguous";
    row["min_blocks"] = MINB;
    row["block"] = BLOCK;
    row["unroll"] = UNROLL;
    row["hint"] = H == load_hint::stream ? "nc.L1::no_allocate.L2::256B" : "ldg";
    row["blocks_per_sm"] = per_sm;
    row["occupancy"] = occ;
    row["us"] = t.graph_us;
    row["gbps"] = n * sizeof(T) / (t.graph_us * 1e-6) / 1e9;
    tab.rows.push_back(row);
    if (progress)
      progress(fmt::format("large {} B{} U{} {} {} {}/SM: {:.1f} GB/s", dname<T>(), BLOCK, UNROLL,
                           std::string(row["hint"]), std::string(row["layout"]), per_sm, double(row["gbps"])));
    if (per_sm == occ) break;
  }
}

template <class T, class Op, int BLOCK, int UNROLL, layout L, int MINB>
void mid_sweep(const sweep_ctx<T, Op>& c, int min_log2, int max_log2, table& tab, bool quick, bool clusters,
               const std::function<void(const std::string&)>& progress) {
  auto kernel = core::reduce_kernel<T, Op, BLOCK, UNROLL, load_hint::stream, L, MINB>;
  auto ckernel = cluster_kernel<T, Op, BLOCK, UNROLL>;
  check(cudaFuncSetAttribute(ckernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), "cluster attr");
  int occ = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, BLOCK, 0), "occupancy");
  const unsigned cap = unsigned(occ * c.sms);
  constexpr std::uint64_t V = 16 / sizeof(T);
  for (int k = min_log2; k <= max_log2; k += 2) {
    const std::uint64_t n = std::uint64_t(1) << k;
    core::reduce_args<T, Op> a{c.d_in, n, c.d_out, c.d_partials, c.d_counter};
    std::vector<launch_shape> shapes;
    // From one block up to one vector per thread, and the full resident grid.
    for (unsigned b = 1; b <= cap && std::uint64_t(b / 2) * BLOCK * V < n; b *= 2) shapes.push_back({b, true, 0});
    for (unsigned b : {cap / 4, cap / 2, (cap * 3) / 4, cap})
      if (b > shapes.back().blocks && std::uint64_t(b) * BLOCK * V / 2 < n) shapes.push_back({b, true, 0});
    shapes.push_back({1, false, 0});  // one block, no PDL
    if (clusters && n <= std::uint64_t(16) * BLOCK * UNROLL * V * 8)
      for (int cs : {4, 8, 16}) shapes.push_back({unsigned(cs), true, cs});
    for (const auto& sh : shapes) {
      tt t{};
      if (sh.cluster) {
        t = time_launch([&](cudaStream_t s) { check(launch_k(ckernel, BLOCK, sh, s, a), "cluster launch"); },
                        c.s, quick ? 100 : 500, quick ? 3 : 7);
      } else {
        t = time_launch([&](cudaStream_t s) { check(launch_k(kernel, BLOCK, sh, s, a), "launch"); }, c.s,
                        quick ? 100 : 500, quick ? 3 : 7);
      }
      json row;
      row["dtype"] = dname<T>();
      row["n"] = fmt::format("2^{}", k);
      row["block"] = BLOCK;
      row["unroll"] = UNROLL;
      row["layout"] = L == layout::strided ? "strided" : "contiguous";
      row["blocks"] = sh.blocks;
      row["pdl"] = sh.pdl;
      row["cluster"] = sh.cluster;
      row["graph_us"] = t.graph_us;
      row["stream_us"] = t.stream_us;
      tab.rows.push_back(row);
    }
    if (progress) progress(fmt::format("mid {} B{} U{} 2^{} done", dname<T>(), BLOCK, UNROLL, k));
  }
}

template <class T>
sweep_ctx<T, core::op_sum<T>> make_ctx(device_buffer& in, device_buffer& out, device_buffer& ws,
                                       cudaStream_t s, int sms) {
  using Op = core::op_sum<T>;
  return {static_cast<const T*>(in.get()), static_cast<typename Op::out_type*>(out.get()),
          static_cast<typename Op::acc_type*>(ws.get()),
          reinterpret_cast<unsigned*>(static_cast<char*>(ws.get()) + 4096 * 32), s, sms};
}

}  // namespace

report run_tune(bool quick, const std::function<void(const std::string&)>& progress) {
  const device_info dev = current_device();
  const ceiling ceil = measure_ceiling();
  const std::uint64_t big = std::uint64_t(1) << 30;  // f32 elements: 4 GiB
  device_buffer in(big * 4), out(16), ws(4096 * 32 + 256);
  check(cudaMemset(ws.get(), 0, ws.size()), "cudaMemset");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");

  report rep;
  rep.meta["benchmark"] = "tally bench tune";
  rep.meta["device"] = dev.name;
  rep.meta["date"] = utc_now();
  rep.meta["read_ceiling_gbps"] = ceil.read_gbps;
  table large{"large inputs: kernel shape x blocks per SM (graph replay, f32/i32 2^30, f64 2^29)",
              {{"dtype", "dtype"}, {"block", "block"}, {"unroll", "loads/thread"}, {"hint", "load"},
               {"layout", "layout"}, {"min_blocks", "min blocks"},
               {"blocks_per_sm", "blocks/SM"}, {"occupancy", "max/SM"}, {"us", "us", 1}, {"gbps", "GB/s", 1}},
              {}};
  table mid{"middle inputs: grid size, PDL, clusters (per call)",
            {{"dtype", "dtype"}, {"n", "n"}, {"block", "block"}, {"unroll", "unroll"}, {"layout", "layout"},
             {"blocks", "blocks"},
             {"pdl", "PDL"}, {"cluster", "cluster"}, {"graph_us", "graph us", 2}, {"stream_us", "stream us", 2}},
            {}};

  using CT = layout;
  {
    fill_random(in.get(), big, dtype::f32, 99, 0.0, 1.0, s);
    auto c = make_ctx<float>(in, out, ws, s, dev.sm_count);
    using Op = core::op_sum<float>;
    large_sweep<float, Op, 512, 4, load_hint::stream, CT::contiguous, 1>(c, big, large, quick, progress);
    large_sweep<float, Op, 512, 4, load_hint::stream, CT::strided, 1>(c, big, large, quick, progress);
    large_sweep<float, Op, 512, 4, load_hint::ldg, CT::strided, 1>(c, big, large, quick, progress);
    large_sweep<float, Op, 512, 8, load_hint::stream, CT::strided, 1>(c, big, large, quick, progress);
    large_sweep<float, Op, 256, 8, load_hint::stream, CT::strided, 1>(c, big, large, quick, progress);
    large_sweep<float, Op, 1024, 4, load_hint::stream, CT::strided, 1>(c, big, large, quick, progress);
    mid_sweep<float, Op, 512, 4, CT::contiguous, 1>(c, 10, 24, mid, quick, true, progress);
    mid_sweep<float, Op, 512, 4, CT::strided, 1>(c, 10, 24, mid, quick, false, progress);
  }
  {
    fill_random(in.get(), big / 2, dtype::f64, 98, 0.0, 1.0, s);
    auto c = make_ctx<double>(in, out, ws, s, dev.sm_count);
    using Op = core::op_sum<double>;
    large_sweep<double, Op, 512, 4, load_hint::stream, CT::contiguous, 1>(c, big / 2, large, quick, progress);
    large_sweep<double, Op, 512, 4, load_hint::stream, CT::strided, 1>(c, big / 2, large, quick, progress);
    large_sweep<double, Op, 512, 8, load_hint::stream, CT::contiguous, 1>(c, big / 2, large, quick, progress);
    large_sweep<double, Op, 512, 8, load_hint::stream, CT::strided, 1>(c, big / 2, large, quick, progress);
    mid_sweep<double, Op, 512, 4, CT::contiguous, 1>(c, 10, 24, mid, quick, false, progress);
    mid_sweep<double, Op, 512, 4, CT::strided, 1>(c, 10, 24, mid, quick, false, progress);
    mid_sweep<double, Op, 512, 8, CT::strided, 1>(c, 16, 24, mid, quick, false, progress);
  }
  {
    fill_random(in.get(), big, dtype::i32, 97, -1000.0, 1000.0, s);
    auto c = make_ctx<std::int32_t>(in, out, ws, s, dev.sm_count);
    using Op = core::op_sum<std::int32_t>;
    large_sweep<std::int32_t, Op, 512, 4, load_hint::stream, CT::contiguous, 3>(c, big, large, quick, progress);
    large_sweep<std::int32_t, Op, 512, 4, load_hint::stream, CT::strided, 3>(c, big, large, quick, progress);
    large_sweep<std::int32_t, Op, 512, 4, load_hint::stream, CT::strided, 1>(c, big, large, quick, progress);
    large_sweep<std::int32_t, Op, 256, 8, load_hint::stream, CT::strided, 3>(c, big, large, quick, progress);
    mid_sweep<std::int32_t, Op, 512, 4, CT::strided, 3>(c, 20, 24, mid, quick, false, progress);
  }
  {
    fill_random(in.get(), big, dtype::f32, 96, -1.0, 1.0, s);
    auto c = make_ctx<float>(in, out, ws, s, dev.sm_count);
    using Op = core::op_max<float>;
    sweep_ctx<float, Op> cm{c.d_in, c.d_out, c.d_partials, c.d_counter, c.s, c.sms};
    large_sweep<float, Op, 512, 4, load_hint::stream, CT::strided, 1>(cm, big, large, quick, progress);
    large_sweep<float, Op, 512, 4, load_hint::stream, CT::contiguous, 1>(cm, big, large, quick, progress);
  }
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  rep.tables.push_back(std::move(large));
  rep.tables.push_back(std::move(mid));
  return rep;
}

}  // namespace tally::bench
