// Kernels and launchers of the plain ops for int16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(int16_t)
