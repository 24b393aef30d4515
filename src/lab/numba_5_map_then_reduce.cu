// Origin: Numba chapter on reductions, the map-then-reduce dot product (Listing 7.5, tpb = 512).
// Change: no atomics: a map kernel writes w[i] = x[i] * y[i] to a scratch array, then a reduction
//   kernel (one element per thread in shared memory, interleaved tree `tdx % (2*stride) == 0 &&
//   i + stride < n`) writes one partial per block and is relaunched on the partials until one block
//   is left.
// Flaw: w makes a full extra round trip through global memory; the interleaved `%` tree keeps every
//   warp active but mostly idle, and each pass is a separate launch.
// Fixed: the printed reduction returns early (`if i >= n: return`) before its barriers, so in the
//   last block some threads never reach them; here those threads stay, store 0 and join every barrier.
// Enforced: tpb a power of two (the tree pairs tdx with tdx + stride inside the block), 2..1024
//   (tpb = 1 would never shrink the partials).
// Generalised: 64-bit element index.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void dot_map(T* w, const T* u, const T* v, std::uint64_t n) {
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;  // no barrier in this kernel: the early return is safe
  w[i] = u[i] * v[i];
}

template <class T>
__global__ void reduction(const T* w, std::uint64_t n, T* accum) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sh_accum = reinterpret_cast<T*>(smem);  // tpb entries
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned tdx = threadIdx.x;
  sh_accum[tdx] = i < n ? w[i] : T(0);  // instead of returning: every thread reaches the barriers
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    if (tdx % (2 * stride) == 0 && i + stride < n) sh_accum[tdx] += sh_accum[tdx + stride];
    __syncthreads();
  }
  if (tdx == 0) accum[blockIdx.x] = sh_accum[0];
}

template <class T>
class numba5 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "tpb", "the tree pairs tdx with tdx + stride inside the block");
    require_range(a, "tpb", 2, 1024, "a pass must shrink the count (tpb >= 2); a CUDA block holds at most 1024 threads");
    if (a.d_y == nullptr) throw config_error("numba-5 is a dot product: it needs a second vector y");
    if (blocks_for(a.n, static_cast<std::uint64_t>(p(a, "tpb"))) > 0x7fffffffu)
      throw config_error("n too large: one element per thread needs more than 2^31 - 1 blocks");
  }
  void launch(const run_args& a) override {
    const unsigned tpb = static_cast<unsigned>(p(a, "tpb"));
    if (a.n == 0) {  // nothing to launch: the dot product is 0
      result_ = w_.as<T>(1);
      check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(result)");
      return;
    }
    T* w = w_.as<T>(a.n);
    dot_map<T><<<blocks_for(a.n, tpb), tpb, 0, a.stream>>>(w, static_cast<const T*>(a.d_x), static_cast<const T*>(a.d_y), a.n);
    check_launch("dot_map");
    run_args b = a;  // the reduction passes start from w, not from x
    b.d_x = w;
    result_ = reduce_passes<T>(b, s0_, s1_, tpb, [&](const T* in, std::uint64_t count, T* out, unsigned grid) {
      reduction<T><<<grid, tpb, tpb * sizeof(T), a.stream>>>(in, count, out);
      check_launch("reduction");
    });
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }

 private:
  scratch w_, s0_, s1_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "numba-5";
  m.group = "numba";
  m.order = 5;
  m.title = "map kernel for the products, interleaved tree, relaunch";
  m.origin = "Numba chapter, map then reduce (Listing 7.5)";
  m.change = "no atomics: products mapped into w, then a shared-memory tree per block, relaunched on the partials";
  m.flaw = "w makes an extra trip through global memory; the % tree leaves warps divergent; one launch per pass";
  m.dot = true;
  m.requirements = "tpb a power of two, 2..1024 (enforced); the printed early return before the barriers is replaced by zero padding";
  m.params = {{"tpb", 512, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(numba5, meta);

}  // namespace
}  // namespace tally::lab
