// The segmented layer's kernels and launchers for uint8_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(std::uint8_t)
