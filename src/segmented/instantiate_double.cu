// The segmented layer's kernels and launchers for double elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(double)
