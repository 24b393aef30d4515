// Kernels and launchers of the plain ops for int8_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(int8_t)
