// Kernels and launchers for int8_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::int8_t)
