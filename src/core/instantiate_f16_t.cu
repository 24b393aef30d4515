// Kernels and launchers of the plain ops for f16 (stored as 16 bits, computed in f32) elements.
#include "launch.cuh"

TALLY_INSTANTIATE_BASIC(tally::core::f16_t)
