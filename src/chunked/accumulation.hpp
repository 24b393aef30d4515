// The device half of a chunked reduction: each piece launched on one stream into its slot of a
// partials array (or, in exact mode, into the carry), and the partials folded on the host, in
// piece order, when the array fills up or the result is asked for.
//
//   accumulation acc({what::reduce, dtype::f32, op::max, {}}, dev, stream);
//   acc.piece(d_a, nullptr, n1);  acc.piece(d_b, nullptr, n2);   // device memory
//   value v = acc.result();                                        // max over both
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "chunked/combine.hpp"
#include "core/context.hpp"

namespace tally::chunked {

// The memory an accumulation works in: kSlots partials of up to kMaxPartial bytes on the device
// and a pinned mirror, and the exact carry on the device and a pinned mirror.
struct accumulation_memory {
  static constexpr int kSlots = 1024;
  static constexpr std::size_t kMaxPartial = 48;  // a tally::stats record
  unsigned char* d_partials = nullptr;
  unsigned char* h_partials = nullptr;
  long long* d_carry = nullptr;
  long long* h_carry = nullptr;
  accumulation_memory();  // allocates (throws tally::error naming what failed)
  ~accumulation_memory();
  accumulation_memory(const accumulation_memory&) = delete;
  accumulation_memory& operator=(const accumulation_memory&) = delete;
};

class accumulation {
 public:
  // Works in `memory`, which must outlive it and serve one accumulation at a time.
  accumulation(const spec& s, const core::device_context& dev, cudaStream_t stream, accumulation_memory& memory);
  ~accumulation();
  accumulation(const accumulation&) = delete;
  accumulation& operator=(const accumulation&) = delete;

  // Launches the piece plan over n elements of device-readable memory at d_in (and d_in2 for
  // dot) on the stream. n = 0 launches nothing.
  void piece(const void* d_in, const void* d_in2, std::uint64_t n);
  // Exact plans: adds the exact sum of `count` elements reduced elsewhere (the host's share of a
  // head start, src/chunked/head_start): kWords normalised words and the special-value flags.
  void add_exact(const long long* words, unsigned flags, std::uint64_t count);
  value result();         // waits for the stream
  stats stats_result();   // waits for the stream
  void reset();
  std::uint64_t count() const noexcept { return count_; }
  cudaStream_t stream() const noexcept { return stream_; }
  const spec& what_of() const noexcept { return spec_; }
  bool plan_exact() const noexcept { return comb_.plan().exact; }
  const core::device_context& device() const noexcept { return *dev_; }

  static constexpr int kSlots = accumulation_memory::kSlots;

 private:
  void drain();  // the pending partials to the host, folded in order (waits for the stream)

  spec spec_;
  combiner comb_;
  const core::device_context* dev_;
  cudaStream_t stream_;
  accumulation_memory& mem_;
  std::vector<std::uint64_t> first_, count_of_;  // the pending pieces
  std::uint64_t count_ = 0;
};

}  // namespace tally::chunked
