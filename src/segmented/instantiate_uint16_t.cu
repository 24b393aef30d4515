// The segmented layer's kernels and launchers for uint16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::uint16_t)
