// TALLY_HD: functions that host code and kernels both call are __host__ __device__ under nvcc and
// plain functions under a C++ compiler (headers that the CPU-side code and tests include too).
#pragma once

#ifndef TALLY_HD
#ifdef __CUDACC__
#define TALLY_HD __host__ __device__
#else
#define TALLY_HD
#endif
#endif
