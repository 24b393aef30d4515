// The segmented layer's kernels and launchers for int8_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::int8_t)
