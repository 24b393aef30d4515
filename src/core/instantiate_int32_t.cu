// Kernels and launchers for int32_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::int32_t)
