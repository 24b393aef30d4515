// The segmented layer's kernels and launchers for int16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::int16_t)
