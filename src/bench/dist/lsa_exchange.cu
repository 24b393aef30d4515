#include "bench/dist/lsa_exchange.hpp"

#include <cstdint>
#include <cstring>

#include "dist/nccl_device.hpp"

namespace tally::bench::lsa {

#ifdef TALLY_DIST_DEVICE_API

struct exchange {
  ncclComm_t comm = nullptr;
  int size = 1;
  std::size_t record = 0;
  void* buf = nullptr;  // the window: two halves (calls alternate), size records each
  std::size_t bytes = 0;
  ncclWindow_t win = nullptr;
  ncclDevComm dev{};
  bool dev_made = false;
  unsigned int calls = 0;
};

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block. Call c writes into half c % 2 of every window: a rank still copying call c's records
// out of its half has not yet reached call c + 1's barrier, which every writer of call c + 2
// passed first.
__global__ void exchange_kernel(ncclDevComm dev, ncclWindow_t win, unsigned int record_words, unsigned int call,
                                unsigned long long spin_ns, uint4* h_all) {
  if (threadIdx.x == 0) {
    const unsigned long long t0 = global_ns();
    while (global_ns() - t0 < spin_ns) {
    }
  }
  __syncthreads();
  const int rank = dev.rank, size = dev.nRanks;
  const std::size_t half = static_cast<std::size_t>(call & 1u) * size * record_words * sizeof(uint4);
  const std::size_t mine = half + static_cast<std::size_t>(rank) * record_words * sizeof(uint4);
  for (int peer = 0; peer < size; ++peer) {
    uint4* to = static_cast<uint4*>(ncclGetLsaPointer(win, mine, peer));
    for (unsigned int w = threadIdx.x; w < record_words; w += blockDim.x)
      to[w] = w == 0 ? make_uint4(static_cast<unsigned int>(rank), call, 0x54414c59u, 0u) : make_uint4(0u, 0u, 0u, 0u);
  }
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, ncclTeamTagLsa(), 0u};
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  const uint4* all = static_cast<const uint4*>(ncclGetLsaPointer(win, half, rank));
  for (unsigned int w = threadIdx.x; w < record_words * static_cast<unsigned int>(size); w += blockDim.x) h_all[w] = all[w];
}

std::string nccl_text(const char* what, ncclResult_t r) {
  return std::string(what) + ": " + ncclGetErrorString(r);
}

}  // namespace

std::string make(ncclComm_t comm, std::size_t record_bytes, const std::function<bool(bool)>& agree, exchange** out) {
  *out = nullptr;
  int size = 0;
  ncclResult_t r = ncclCommCount(comm, &size);
  std::string why = r == ncclSuccess ? "" : nccl_text("ncclCommCount", r);
  if (record_bytes % sizeof(uint4) != 0) why = "the record is not a whole number of 16-byte words";
  exchange* x = new exchange;
  x->comm = comm;
  x->size = size;
  x->record = record_bytes;
  x->bytes = 2 * static_cast<std::size_t>(size) * record_bytes;
  const auto step = [&](const char* what, auto&& f) {
    if (!why.empty()) return;
    const ncclResult_t e = f();
    if (e != ncclSuccess) why = nccl_text(what, e);
    if (!agree(why.empty()) && why.empty()) why = std::string("another rank failed at ") + what;
  };
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE)
    why = "NCCL " + std::to_string(version) + " at run time, built with " + std::to_string(NCCL_VERSION_CODE) + "'s headers";
  if (!agree(why.empty()) && why.empty()) why = "another rank failed to start";
  step("ncclMemAlloc", [&] { return ncclMemAlloc(&x->buf, x->bytes); });
  step("ncclCommWindowRegister",
       [&] { return ncclCommWindowRegister(comm, x->buf, x->bytes, &x->win, NCCL_WIN_COLL_SYMMETRIC); });
  step("ncclDevCommCreate", [&] {
    ncclDevCommRequirements reqs = dist::lsa_requirements(1);
    const ncclResult_t e = ncclDevCommCreate(comm, &reqs, &x->dev);
    x->dev_made = e == ncclSuccess;
    return e;
  });
  step("cudaMemset(the window)", [&] {
    return cudaMemset(x->buf, 0, x->bytes) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess ? ncclSuccess
                                                                                                   : ncclUnhandledCudaError;
  });
  if (!why.empty()) {
    destroy(x);
    return why;
  }
  *out = x;
  return "";
}

cudaError_t run(exchange* x, cudaStream_t stream, unsigned long long spin_ns, void* h_all) {
  ++x->calls;
  exchange_kernel<<<1, 128, 0, stream>>>(x->dev, x->win, static_cast<unsigned int>(x->record / sizeof(uint4)), x->calls,
                                         spin_ns, static_cast<uint4*>(h_all));
  return cudaGetLastError();
}

std::string check(const exchange* x, const void* h_all) {
  const unsigned char* p = static_cast<const unsigned char*>(h_all);
  for (int k = 0; k < x->size; ++k) {
    unsigned int w[4];
    std::memcpy(w, p + static_cast<std::size_t>(k) * x->record, sizeof w);
    if (w[0] != static_cast<unsigned int>(k) || w[1] != x->calls || w[2] != 0x54414c59u)
      return "rank " + std::to_string(k) + "'s record says rank " + std::to_string(w[0]) + ", call " +
             std::to_string(w[1]) + " (call " + std::to_string(x->calls) + " expected)";
  }
  return "";
}

void destroy(exchange* x) {
  if (x == nullptr) return;
  (void)cudaDeviceSynchronize();
  if (x->dev_made) (void)ncclDevCommDestroy(x->comm, &x->dev);
  if (x->win != nullptr) (void)ncclCommWindowDeregister(x->comm, x->win);
  if (x->buf != nullptr) (void)ncclMemFree(x->buf);
  delete x;
}

#else  // no NCCL device API in this build

struct exchange {};
std::string make(ncclComm_t, std::size_t, const std::function<bool(bool)>&, exchange** out) {
  *out = nullptr;
  return "built without NCCL's device API (nccl_device.h, NCCL 2.28 or later)";
}
cudaError_t run(exchange*, cudaStream_t, unsigned long long, void*) { return cudaErrorNotSupported; }
std::string check(const exchange*, const void*) { return "built without NCCL's device API"; }
void destroy(exchange*) {}

#endif

}  // namespace tally::bench::lsa
