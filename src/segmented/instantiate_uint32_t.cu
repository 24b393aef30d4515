// The segmented layer's kernels and launchers for uint32_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::uint32_t)
