#include "lab/common.cuh"

namespace tally::lab {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw tally::error(std::string("lab: ") + what + " failed: " + cudaGetErrorName(e) + ": " +
                       cudaGetErrorString(e));
  }
}

void require_pow2(const run_args& a, const char* param, const char* why) {
  const int v = a.params.at(param);
  if (!is_pow2(v))
    throw config_error(std::string("--") + param + " " + std::to_string(v) + " is not a power of two: " + why);
}

void require_range(const run_args& a, const char* param, int lo, int hi, const char* why) {
  const int v = a.params.at(param);
  if (v < lo || v > hi)
    throw config_error(std::string("--") + param + " " + std::to_string(v) + " is outside [" + std::to_string(lo) +
                       ", " + std::to_string(hi) + "]: " + why);
}

std::uint64_t variant::error_height(const run_args& a) const {
  std::uint64_t h = 64;
  for (std::uint64_t n = a.n; n > 1; n >>= 1) h += 2;
  return h;
}

void* scratch::get(std::size_t bytes) {
  if (bytes > buf_.size()) buf_ = tally::device_buffer(bytes);
  return buf_.get();
}

}  // namespace tally::lab
