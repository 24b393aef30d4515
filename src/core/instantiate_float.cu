// Kernels and launchers for float elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(float)
