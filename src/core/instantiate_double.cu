// Kernels and launchers for double elements.
#include "launch.cuh"

TALLY_INSTANTIATE_LAUNCHERS(double)
