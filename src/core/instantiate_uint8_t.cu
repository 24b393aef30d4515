// Kernels and launchers of the plain ops for uint8_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(uint8_t)
