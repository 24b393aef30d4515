// Kernels and launchers of the plain ops for bf16 (stored as 16 bits, computed in f32) elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(tally::core::bf16_t)
