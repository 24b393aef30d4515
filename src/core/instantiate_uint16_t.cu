// Kernels and launchers for uint16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::uint16_t)
