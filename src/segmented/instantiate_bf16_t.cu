// The segmented layer's kernels and launchers for bf16_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_SEGMENTED(tally::core::bf16_t)
