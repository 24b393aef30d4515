// The segmented layer's kernels and launchers for int32_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::int32_t)
