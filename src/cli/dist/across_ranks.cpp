// `tally reduce FILE --ranks` (see across_ranks.hpp).
#include "cli/dist/across_ranks.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "tally/dist.hpp"
#include "tally/dist_mpi.hpp"

namespace tally::cli {
namespace {

// Every rank's own failure ("" when none) made known to all: the first failing rank's message.
std::string agree(const std::string& own, int rank) {
  char mine[512] = {};
  std::strncpy(mine, own.c_str(), sizeof mine - 1);
  int size = 1;
  dist::check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  std::vector<char> all(sizeof mine * static_cast<std::size_t>(size));
  dist::check_mpi(MPI_Allgather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, MPI_COMM_WORLD),
                  "MPI_Allgather(the ranks' errors)");
  for (int k = 0; k < size; ++k) {
    const char* m = all.data() + sizeof mine * static_cast<std::size_t>(k);
    if (m[0] != '\0') return k == rank ? std::string(m) : "rank " + std::to_string(k) + " failed: " + m;
  }
  return "";
}

}  // namespace

int reduce_across_ranks(const io::array_file& a, op o, const options& opt,
                        const std::function<void(const value&)>& print) {
  std::optional<dist::mpi_session> mpi;
  try {
    mpi.emplace();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tally: error: reduce --ranks: %s\n", e.what());
    return 1;
  }
  const int rank = mpi->rank(), size = mpi->size();
  int rc = 0;
  try {
    std::optional<dist::communicator> comm;
    std::string own;
    try {
      comm.emplace(dist::mpi_communicator(MPI_COMM_WORLD));
    } catch (const std::exception& e) {
      own = e.what();
    }
    std::string why = agree(own, rank);
    if (!why.empty()) throw error(why);
    const cudaError_t e = cudaSetDevice(comm->device());
    if (e != cudaSuccess)
      throw error("cudaSetDevice(" + std::to_string(comm->device()) + ") failed: " + cudaGetErrorString(e));
    // This rank's slice, read from the file into host memory, then onto its GPU.
    const std::uint64_t n = a.count();
    const std::uint64_t first = n * static_cast<std::uint64_t>(rank) / size;
    const std::uint64_t count = n * static_cast<std::uint64_t>(rank + 1) / size - first;
    const std::size_t bytes = count * dtype_size(a.type());
    device_buffer slice;
    try {
      std::vector<unsigned char> host(bytes);
      if (count > 0) a.read(host.data(), first, count);
      slice = device_buffer(std::max<std::size_t>(bytes, 1));
      if (count > 0) slice.upload(host.data(), bytes);
    } catch (const std::exception& e) {
      own = "its slice (elements " + std::to_string(first) + " to " + std::to_string(first + count) + "): " + e.what();
    }
    why = agree(own, rank);
    if (!why.empty()) throw error(why);
    const value v = dist::reduce(*comm, {slice.get(), count, first, nullptr}, a.type(), o, opt);
    if (rank == 0) print(v);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tally: error: reduce --ranks (rank %d of %d): %s\n", rank, size, e.what());
    rc = 1;
  }
  return rc;
}

}  // namespace tally::cli
