// Kernels and launchers for int16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::int16_t)
