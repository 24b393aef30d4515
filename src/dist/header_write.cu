// The record header written by a kernel whose argument is the header (src/dist/partial.hpp,
// enqueue_header_write): a copy from host memory would read that memory again at every replay
// of a captured graph, after later calls had changed it.
#include <cstring>

#include "core/context.hpp"
#include "dist/partial.hpp"

namespace tally::dist {
namespace {

struct header_words {
  unsigned long long w[kHeaderBytes / 8];
};

__global__ void write_header(unsigned long long* __restrict__ dst, header_words h) {
  for (unsigned i = threadIdx.x; i < kHeaderBytes / 8; i += blockDim.x) dst[i] = h.w[i];
}

}  // namespace

void enqueue_header_write(unsigned char* d_record, const header& h, cudaStream_t stream) {
  header_words b{};
  std::memcpy(&b, &h, sizeof h);
  write_header<<<1, 32, 0, stream>>>(reinterpret_cast<unsigned long long*>(d_record), b);
  core::check_cuda(cudaGetLastError(), "the record header's write (a kernel)");
}

}  // namespace tally::dist
