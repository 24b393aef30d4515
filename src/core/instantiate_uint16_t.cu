// Kernels and launchers of the plain ops for uint16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(uint16_t)
