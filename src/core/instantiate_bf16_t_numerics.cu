// Kernels and launchers of argmin/argmax, mean, stats (and for floats: sum_sq, norm2,
// compensated and exact sums, dot) for bf16 (stored as 16 bits, computed in f32) elements.
#include "launch.cuh"

TALLY_INSTANTIATE_NUMERICS(tally::core::bf16_t)
