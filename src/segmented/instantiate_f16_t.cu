// The segmented layer's kernels and launchers for f16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(tally::core::f16_t)
