// `mpirun -np N tally reduce FILE --ranks`: one file reduced across the ranks of an MPI job, each
// rank reading its own slice of the array (elements [k N / ranks, (k + 1) N / ranks)) onto its own
// GPU, the slices combined by tally::dist (so exact mode gives the same bits as one GPU).
#pragma once

#include <functional>

#include "io/npy.hpp"
#include "tally/tally.hpp"

namespace tally::cli {

// Initialises and finalises MPI. Rank 0 calls `print` with the result. A failure on any rank (its
// slice unreadable, its GPU out of memory, the collective) ends every rank with the message, on
// stderr of the rank that knows it and of rank 0; returns the exit code.
int reduce_across_ranks(const io::array_file& a, op o, const options& opt,
                        const std::function<void(const value&)>& print);

}  // namespace tally::cli
