// The sharded reductions with one process per GPU, under MPI:
//   mpirun -np 2 build/dev/tally_dist_mpi_check [log2 n]
// Every rank makes the same global array (one seed), reduces its own uneven shard with
// tally::dist and compares with tally's one-GPU reduce of the whole array on its own GPU (bitwise
// for exact, integer and min/max/arg ops), then checks the failures: ranks that disagree, a rank
// with a bad shard, a rank that never calls (the others time out instead of hanging). Prints one
// line per check; exits 1 on any failure (on every rank).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tally/dist.hpp"
#include "tally/dist_mpi.hpp"

namespace {

int failures = 0, checks = 0;
int rank_ = 0, size_ = 1;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::printf("rank %d FAIL: %s\n", rank_, what.c_str());
  } else if (rank_ == 0) {
    std::printf("ok: %s\n", what.c_str());
  }
  std::fflush(stdout);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const tally::error& e) {
    return e.what();
  }
  return "";
}

// Shard k of `ranks` of an n-element array: sizes (k + 1) / (1 + ... + ranks) of it, or equal.
void shard_of(std::size_t n, int k, int ranks, bool uneven, std::size_t& first, std::size_t& count) {
  auto edge = [&](int j) -> std::size_t {
    if (j >= ranks) return n;
    if (!uneven) return n * static_cast<std::size_t>(j) / ranks;
    return n * static_cast<std::size_t>(j) * (j + 1) / (static_cast<std::size_t>(ranks) * (ranks + 1));
  };
  first = edge(k);
  count = edge(k + 1) - first;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  const int log2n = argc > 1 ? std::atoi(argv[1]) : 24;
  // The exchange of every communicator: "device" (dist_options::device_exchange, the default, and
  // the check that NCCL's device API is in use), "allgather" (device_exchange = false), or
  // nothing (the default, whichever exchange the communicator chose).
  const std::string how = argc > 2 ? argv[2] : "";
  const bool device = how != "allgather";
  const std::size_t n = (std::size_t(1) << log2n) + 777;
  try {
    tally::dist::dist_options o;
    o.timeout_ms = 20000;
    o.device_exchange = device;
    std::optional<tally::dist::communicator> held;
    held.emplace(tally::dist::mpi_communicator(MPI_COMM_WORLD, -1, o));
    tally::dist::communicator& comm = *held;
    if (rank_ == 0) std::printf("exchange: %s\n", comm.exchange().c_str());
    if (how == "device") expect(comm.exchange() == "NCCL device API", "the device exchange is in use (" + comm.exchange() + ")");
    if (how == "allgather") expect(comm.exchange() == "NCCL all-gather", "the all-gather is in use (" + comm.exchange() + ")");
    // This rank's buffers on this rank's GPU.
    if (cudaSetDevice(comm.device()) != cudaSuccess) throw tally::error("cudaSetDevice failed");
    if (rank_ == 0) std::printf("%d ranks, n = %zu\n", size_, n);

    std::mt19937_64 rng(2026);
    std::vector<float> xf(n);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& v : xf) v = nd(rng);
    xf[n / 5] = xf[4 * n / 5] = 1e6f;  // a tie for argmax across the ranks
    std::vector<std::int32_t> xi(n);
    std::uniform_int_distribution<std::int32_t> ud(-1000000, 1000000);
    for (auto& v : xi) v = ud(rng);
    tally::device_buffer whole_f(n * 4), whole_i(n * 4);
    whole_f.upload(xf.data(), n * 4);
    whole_i.upload(xi.data(), n * 4);

    for (bool uneven : {false, true}) {
      std::size_t first = 0, count = 0;
      shard_of(n, rank_, size_, uneven, first, count);
      tally::device_buffer bf(std::max<std::size_t>(4, count * 4)), bi(std::max<std::size_t>(4, count * 4));
      if (count > 0) bf.upload(xf.data() + first, count * 4), bi.upload(xi.data() + first, count * 4);
      const tally::dist::shard sf{bf.get(), count, first, nullptr}, si{bi.get(), count, first, nullptr};
      const std::string tag = uneven ? " (uneven shards)" : " (equal shards)";
      tally::options exact;
      exact.mode = tally::accuracy::exact;
      expect(tally::dist::reduce(comm, sf, tally::dtype::f32, tally::op::sum, exact) ==
                 tally::reduce_value(whole_f.get(), n, tally::dtype::f32, tally::op::sum, nullptr, exact),
             "exact f32 sum: the same bits as one GPU" + tag);
      expect(tally::dist::reduce(comm, sf, tally::dtype::f32, tally::op::mean, exact) ==
                 tally::reduce_value(whole_f.get(), n, tally::dtype::f32, tally::op::mean, nullptr, exact),
             "exact f32 mean: the same bits as one GPU" + tag);
      for (tally::op op : {tally::op::sum, tally::op::min, tally::op::max, tally::op::argmin, tally::op::argmax}) {
        expect(tally::dist::reduce(comm, si, tally::dtype::i32, op) ==
                   tally::reduce_value(whole_i.get(), n, tally::dtype::i32, op),
               std::string("i32 ") + tally::to_string(op) + ": the same as one GPU" + tag);
      }
      const tally::value am = tally::dist::reduce(comm, sf, tally::dtype::f32, tally::op::argmax);
      expect(am.index == static_cast<std::int64_t>(n / 5), "f32 argmax: the first of two equal maxima" + tag);
      const tally::value f0 = tally::dist::reduce(comm, sf, tally::dtype::f32, tally::op::sum);
      bool same = true;
      for (int r = 0; r < 20; ++r) same = same && tally::dist::reduce(comm, sf, tally::dtype::f32, tally::op::sum) == f0;
      expect(same, "fast f32 sum: the same bits over 20 runs" + tag);
      const tally::stats st = tally::dist::reduce_stats(comm, sf, tally::dtype::f32);
      const tally::stats one = tally::stats_value(whole_f.get(), n, tally::dtype::f32);
      expect(st.count == n && st.min == one.min && st.max == one.max, "stats: count, min and max" + tag);

      // The stream-ordered form: the same bits as one GPU, queued and from a captured graph (on a
      // non-blocking stream: the uploads above, on the legacy stream, finished first).
      if (cudaDeviceSynchronize() != cudaSuccess) throw tally::error("cudaDeviceSynchronize failed");
      cudaStream_t cs = nullptr;
      if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess) throw tally::error("cudaStreamCreate failed");
      const tally::stream_t ts = reinterpret_cast<tally::stream_t>(cs);
      tally::device_buffer res(64);
      tally::dist::reduce_async(comm, sf, tally::dtype::f32, tally::op::sum, res.get(), ts, exact);
      tally::dist::synchronize(comm, ts);
      float got = 0;
      res.download(&got, 4);
      const tally::value one_exact = tally::reduce_value(whole_f.get(), n, tally::dtype::f32, tally::op::sum, nullptr, exact);
      expect(got == static_cast<float>(one_exact.f), "reduce_async exact f32 sum: the same bits as one GPU" + tag);
      if (cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) != cudaSuccess) throw tally::error("capture failed");
      tally::dist::reduce_async(comm, si, tally::dtype::i32, tally::op::argmax, res.get(), ts);
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      if (cudaStreamEndCapture(cs, &g) != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess)
        throw tally::error("capture of reduce_async failed");
      const tally::value one_am = tally::reduce_value(whole_i.get(), n, tally::dtype::i32, tally::op::argmax);
      for (int replay = 0; replay < 3; ++replay) {
        if (cudaGraphLaunch(ge, cs) != cudaSuccess) throw tally::error("cudaGraphLaunch failed");
        tally::dist::synchronize(comm, ts);
        std::int64_t index = -2;
        std::int32_t value = 0;
        res.download(&index, 8);
        res.download(&value, 4, 8);
        expect(index == one_am.index && value == one_am.i,
               "reduce_async i32 argmax from a captured graph, replay " + std::to_string(replay) + ": as one GPU" + tag);
      }
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      cudaStreamDestroy(cs);
    }

    // Failures: every rank gets the error; the communicator stays usable.
    {
      std::size_t first = 0, count = 0;
      shard_of(n, rank_, size_, false, first, count);
      tally::device_buffer bf(std::max<std::size_t>(4, count * 4));
      if (count > 0) bf.upload(xf.data() + first, count * 4);
      const tally::dist::shard sf{bf.get(), count, first, nullptr};
      const tally::op o = rank_ == size_ - 1 ? tally::op::max : tally::op::sum;
      std::string e = error_of([&] { tally::dist::reduce(comm, sf, tally::dtype::f32, o); });
      expect(e.find("the ranks disagree") != std::string::npos, "a rank with another op: every rank refuses (" + e + ")");
      // Another dtype over the same bytes (half as many f64): its own checks pass, the ranks' do not.
      tally::dist::shard half = sf;
      if (rank_ == size_ - 1) half.n = count / 2;
      const tally::dtype t = rank_ == size_ - 1 ? tally::dtype::f64 : tally::dtype::f32;
      e = error_of([&] { tally::dist::reduce(comm, half, t, tally::op::sum); });
      expect(e.find("the ranks disagree") != std::string::npos, "a rank with another dtype: every rank refuses (" + e + ")");
      // The same disagreement in the stream-ordered form: found by the combine, reported by
      // synchronize() on every rank, NaN in d_out.
      {
        tally::device_buffer res(64);
        tally::dist::reduce_async(comm, sf, tally::dtype::f32, o, res.get());
        e = error_of([&] { tally::dist::synchronize(comm); });
        float got = 0;
        res.download(&got, 4);
        expect(e.find("reduce_async on rank " + std::to_string(rank_)) != std::string::npos &&
                   e.find("the ranks disagree") != std::string::npos && got != got,
               "reduce_async, a rank with another op: every rank's synchronize() says so, NaN result (" + e + ")");
      }
      std::vector<float> host(16);
      tally::dist::shard bad = sf;
      if (rank_ == size_ - 1) bad.d_in = host.data();
      e = error_of([&] { tally::dist::reduce(comm, bad, tally::dtype::f32, tally::op::sum); });
      expect(e.find("rank " + std::to_string(size_ - 1) + " failed") != std::string::npos,
             "a rank with a host pointer: every rank names it (" + e + ")");
      int gpus = 0;
      if (cudaGetDeviceCount(&gpus) == cudaSuccess && gpus > 1) {
        // The last rank's shard on another GPU than its communicator's.
        if (cudaSetDevice((comm.device() + 1) % gpus) != cudaSuccess) throw tally::error("cudaSetDevice failed");
        tally::device_buffer elsewhere(std::max<std::size_t>(4, count * 4));
        if (cudaSetDevice(comm.device()) != cudaSuccess) throw tally::error("cudaSetDevice failed");
        tally::dist::shard away = sf;
        if (rank_ == size_ - 1) away.d_in = elsewhere.get();
        e = error_of([&] { tally::dist::reduce(comm, away, tally::dtype::f32, tally::op::sum); });
        expect(e.find("rank " + std::to_string(size_ - 1) + " failed") != std::string::npos &&
                   e.find("is memory of device") != std::string::npos,
               "a rank whose shard is on another GPU: every rank names it (" + e + ")");
      }
      tally::options exact;
      exact.mode = tally::accuracy::exact;
      expect(tally::dist::reduce(comm, sf, tally::dtype::f32, tally::op::sum, exact) ==
                 tally::reduce_value(whole_f.get(), n, tally::dtype::f32, tally::op::sum, nullptr, exact),
             "after the failures: the communicator still gives the exact sum");
      held.reset();
    }
    {
      // A rank that never calls: the others time out (2 s) instead of hanging, and abort; the
      // rank that stayed away destroys its communicator (a local operation) and goes on to the
      // final MPI_Allreduce, where every rank meets.
      tally::dist::dist_options quick;
      quick.timeout_ms = 2000;
      quick.device_exchange = device;
      tally::dist::communicator c2 = tally::dist::mpi_communicator(MPI_COMM_WORLD, -1, quick);
      tally::device_buffer one(4);
      const float x = 1.0f;
      one.upload(&x, 4);
      if (rank_ != size_ - 1) {
        const std::string e = error_of([&] {
          tally::dist::reduce(c2, {one.get(), 1, static_cast<std::uint64_t>(rank_), nullptr}, tally::dtype::f32, tally::op::sum);
        });
        expect(e.find("no answer from the other ranks") != std::string::npos && !c2.usable(),
               "a rank that never calls: the others time out and abort (" + e + ")");
      }
    }
  } catch (const std::exception& e) {
    std::printf("rank %d FAIL: %s\n", rank_, e.what());
    ++failures;
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank_ == 0) std::printf("%s: %d checks on rank 0, %d failures on all ranks\n", total ? "FAIL" : "PASS", checks, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
