// Kernels and launchers of the plain ops for uint32_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(uint32_t)
