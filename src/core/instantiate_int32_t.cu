// Kernels and launchers of the plain ops for int32_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(int32_t)
