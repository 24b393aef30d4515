// The segmented layer's kernels and launchers for uint64_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::uint64_t)
