// Kernels and launchers of the plain ops for double elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(double)
