// Kernels and launchers for uint32_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::uint32_t)
