#include "chunked/accumulation.hpp"

#include "core/api_internal.hpp"

namespace tally::chunked {

using core::check_cuda;

namespace {
void release(accumulation_memory& m) noexcept {
  cudaFree(m.d_carry);
  cudaFreeHost(m.h_carry);
  cudaFree(m.d_partials);
  cudaFreeHost(m.h_partials);
  m.d_carry = m.h_carry = nullptr;
  m.d_partials = m.h_partials = nullptr;
}
}  // namespace

accumulation_memory::accumulation_memory() {
  try {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&d_carry), carry_bytes()), "cudaMalloc(a chunked reduction's exact accumulator)");
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&h_carry), carry_bytes()), "cudaMallocHost(a chunked reduction's exact accumulator)");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&d_partials), kMaxPartial * kSlots), "cudaMalloc(a chunked reduction's partials)");
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&h_partials), kMaxPartial * kSlots), "cudaMallocHost(a chunked reduction's partials)");
  } catch (...) {
    release(*this);
    throw;
  }
}

accumulation_memory::~accumulation_memory() { release(*this); }

accumulation::accumulation(const spec& s, const core::device_context& dev, cudaStream_t stream,
                           accumulation_memory& memory)
    : spec_(s), comb_(s), dev_(&dev), stream_(stream), mem_(memory) {
  static_assert(sizeof(stats) <= accumulation_memory::kMaxPartial);
  first_.reserve(kSlots);
  count_of_.reserve(kSlots);
  reset();
}

accumulation::~accumulation() {
  // The stream may still be writing the memory, which outlives this: wait (errors cannot be
  // reported from a destructor; the next call on the stream reports them).
  if (cudaStreamSynchronize(stream_) != cudaSuccess) (void)cudaGetLastError();
}

void accumulation::reset() {
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(resetting a reducer)");
  if (comb_.plan().exact)
    check_cuda(cudaMemsetAsync(mem_.d_carry, 0, carry_bytes(), stream_), "cudaMemsetAsync(a reducer's exact accumulator)");
  comb_.reset();
  first_.clear();
  count_of_.clear();
  count_ = 0;
}

void accumulation::piece(const void* d_in, const void* d_in2, std::uint64_t n) {
  if (n == 0) return;
  const piece_plan& p = comb_.plan();
  const dtype t = spec_.t;
  if (p.exact) {
    core::launch_kind(p.kind, t, d_in, d_in2, n, nullptr, stream_, *dev_, mem_.d_carry);
    count_ += n;
    return;
  }
  if (first_.size() == static_cast<std::size_t>(kSlots)) drain();
  unsigned char* slot = mem_.d_partials + first_.size() * p.partial_bytes;
  core::launch_kind(p.kind, t, d_in, d_in2, n, slot, stream_, *dev_);
  if (p.with_mean) core::launch_kind(core::kind::mean, t, d_in, d_in2, n, slot + 8, stream_, *dev_);
  first_.push_back(count_);
  count_of_.push_back(n);
  count_ += n;
}

void accumulation::add_exact(const long long* words, unsigned flags, std::uint64_t count) {
  comb_.add_exact(words, flags);
  count_ += count;
}

void accumulation::drain() {
  const piece_plan& p = comb_.plan();
  if (first_.empty()) return;
  check_cuda(cudaMemcpyAsync(mem_.h_partials, mem_.d_partials, first_.size() * p.partial_bytes, cudaMemcpyDeviceToHost,
                             stream_),
             "cudaMemcpyAsync(a reducer's partials to the host)");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(a reducer's partials)");
  for (std::size_t k = 0; k < first_.size(); ++k) comb_.fold(mem_.h_partials + k * p.partial_bytes, first_[k], count_of_[k]);
  first_.clear();
  count_of_.clear();
}

value accumulation::result() {
  if (comb_.plan().exact) {
    check_cuda(cudaMemcpyAsync(mem_.h_carry, mem_.d_carry, carry_bytes(), cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync(a reducer's exact accumulator to the host)");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(a reducer's exact accumulator)");
    return comb_.result(mem_.h_carry, count_);
  }
  drain();
  return comb_.result(nullptr, count_);
}

stats accumulation::stats_result() {
  drain();
  return comb_.stats_result();
}

}  // namespace tally::chunked
