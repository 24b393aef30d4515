// Kernels and launchers of the plain ops for float elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(float)
