// Kernels and launchers for uint8_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::uint8_t)
