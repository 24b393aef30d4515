// Kernels and launchers of argmin/argmax, mean, stats (and for floats: sum_sq, norm2,
// compensated and exact sums, dot) for double elements.
#include "launch.cuh"

TALLY_INSTANTIATE_NUMERICS(double)
