// Kernels and launchers of argmin/argmax, mean, stats (and for floats: sum_sq, norm2,
// compensated and exact sums, dot) for int32_t elements.
#include "launch.cuh"

TALLY_INSTANTIATE_NUMERICS(int32_t)
