// Kernels and launchers for int64_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(std::int64_t)
