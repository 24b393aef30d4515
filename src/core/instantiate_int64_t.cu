// Kernels and launchers of the plain ops for int64_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(int64_t)
