// Kernels and launchers of the plain ops for uint64_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(uint64_t)
