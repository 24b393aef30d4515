// Kernels and launchers for uint64_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::uint64_t)
