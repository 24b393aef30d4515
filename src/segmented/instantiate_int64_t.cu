// The segmented layer's kernels and launchers for int64_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::int64_t)
