// The segmented layer's kernels and launchers for float elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(float)
