// Starting tally::dist communicators under MPI, in the caller's code (header only: libtally_dist
// does not link MPI). One process per GPU:
//
//   MPI_Init(&argc, &argv);
//   tally::dist::communicator comm = tally::dist::mpi_communicator(MPI_COMM_WORLD);
//   ... tally::dist::reduce(comm, ...) ...
//   comm = {};  // (or let it go out of scope) before MPI_Finalize
//
// Rank 0 makes NCCL's id and broadcasts it (with MPI_Bcast); each process takes GPU
// (rank on its node) % (GPUs it sees) unless `device` says otherwise. A failure on rank 0 is
// broadcast too, so every rank throws instead of waiting. Works across nodes as it does on one:
// NCCL finds the network (InfiniBand or sockets; see NCCL_SOCKET_IFNAME, NCCL_IB_HCA).
#pragma once

#include <mpi.h>

#include <cstring>
#include <string>

#include "tally/dist.hpp"

namespace tally::dist {

inline void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw error(std::string("tally::dist: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

// MPI for a scope: initialised unless the caller already did (then left to the caller), and
// finalised at the end of the scope when this session started it. Throws when MPI_Init fails.
class mpi_session {
 public:
  mpi_session() {
    int done = 0;
    check_mpi(MPI_Initialized(&done), "MPI_Initialized");
    if (!done) {
      check_mpi(MPI_Init(nullptr, nullptr), "MPI_Init");
      owned_ = true;
    }
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  ~mpi_session() {
    if (owned_) MPI_Finalize();
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

 private:
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};

inline communicator mpi_communicator(MPI_Comm comm, int device = -1, const dist_options& opt = {}) {
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  // Byte 0: 1 when rank 0 made the id; then the id, or rank 0's error text.
  unsigned char msg[1 + sizeof(unique_id::bytes) + 256] = {};
  if (rank == 0) {
    try {
      const unique_id id = make_unique_id();
      msg[0] = 1;
      std::memcpy(msg + 1, id.bytes, sizeof id.bytes);
    } catch (const std::exception& e) {
      std::strncpy(reinterpret_cast<char*>(msg + 1), e.what(), sizeof msg - 2);
    }
  }
  check_mpi(MPI_Bcast(msg, static_cast<int>(sizeof msg), MPI_BYTE, 0, comm), "MPI_Bcast(NCCL's unique id)");
  if (msg[0] != 1)
    throw error("tally::dist::mpi_communicator: rank 0 could not start NCCL: " + std::string(reinterpret_cast<char*>(msg + 1)));
  unique_id id;
  std::memcpy(id.bytes, msg + 1, sizeof id.bytes);
  if (device < 0) {
    MPI_Comm node;
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    int local = 0;
    const int rc = MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    check_mpi(rc, "MPI_Comm_rank(the node's ranks)");
    const int gpus = ::tally::device_count();
    if (gpus < 1) throw error("tally::dist::mpi_communicator: rank " + std::to_string(rank) + " sees no GPU");
    device = local % gpus;
  }
  return communicator::init_rank(id, rank, size, device, opt);
}

}  // namespace tally::dist
