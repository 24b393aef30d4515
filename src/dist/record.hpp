// What each rank of a sharded reduction sends to every other (one NCCL all-gather of fixed-size
// records), and how the records are checked and combined on the host. Plain C++: the CPU tests
// run the checks and the combine without a GPU or NCCL.
//
//   record (kRecordBytes):  header (the call's arguments, the shard, the rank's own error)
//                           | partial (the op's partial as the core writes it, at kPartialOffset)
//                           | exact accumulator (exact modes, at kCarryOffset)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chunked/combine.hpp"

namespace tally::dist {

struct header {
  std::uint32_t magic = 0;  // kMagic: a record that tally wrote
  std::uint32_t version = 0;
  std::int32_t what = 0, dtype = 0, op = 0, nan = 0, mode = 0;
  std::int32_t rank = -1, size = 0;
  std::int32_t failed = 0;  // 1: this rank's own arguments or shard reduce failed (message says why)
  std::uint64_t n = 0, first = 0;
  char message[200] = {};   // the rank's own error, truncated, NUL-terminated
};

inline constexpr std::uint32_t kMagic = 0x44594c54u;  // "TLYD"
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kHeaderBytes = 256;
inline constexpr std::size_t kPartialOffset = kHeaderBytes;
inline constexpr std::size_t kPartialBytes = 64;  // at least chunked::accumulation_memory::kMaxPartial
inline constexpr std::size_t kCarryOffset = kPartialOffset + kPartialBytes;
std::size_t record_bytes();  // kCarryOffset + chunked::carry_bytes(), rounded up to 256
// The largest result a call writes: one tally::stats (reduce and dot write at most 16 bytes).
inline constexpr std::size_t kResultBytes = 64;
static_assert(sizeof(header) <= kHeaderBytes, "the header fits its slot");

// This rank's header: the call (s), its shard, and its own error ("" when none).
header make_header(const chunked::spec& s, int rank, int size, std::uint64_t n, std::uint64_t first,
                   const std::string& own_error);

// Every rank's header checked against this rank's call: "" when all agree, else one message
// (the same text on every rank: it names the first rank that failed or differs, and why).
std::string check_headers(const std::vector<header>& all, const chunked::spec& s);

// The result of a checked set of records (size() of them, record_bytes() apart at `records`):
// the partials folded in the order of the shards' first elements, the exact accumulators added.
value combine(const unsigned char* records, int size, const chunked::spec& s);
stats combine_stats(const unsigned char* records, int size, const chunked::spec& s);

// The combine of the stream-ordered calls (a host function on the caller's stream, so it may not
// throw nor call CUDA): the call is read from rank `rank`'s own record, every record checked
// against it and combined, and the result written at out as the core writes it (kResultBytes at
// most; stats: one tally::stats). Returns "" or the error ("tally::dist::reduce_async on rank r of
// n: ..."), having then written the failure's result instead: NaN for float results and for every
// field of stats but count (0), zero for integers, index -1 for argmin/argmax (all zero when this
// rank's own record cannot be read: then the result type is unknown).
std::string combine_into(const unsigned char* records, int size, int rank, unsigned char* out);

}  // namespace tally::dist
