// Reading .npy files and raw binary files for `tally reduce`.
//
//   npy_header h = parse_npy_header(bytes);  // "\x93NUMPY\x01\x00..." {'descr': '<f4', ...}
//   // h.type == dtype::f32, h.count == product of the shape, h.data_offset == 128
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tally/tally.hpp"

namespace tally::io {

struct npy_header {
  dtype type = dtype::f32;
  std::uint64_t count = 0;        // elements (product of the shape; 1 for a 0-d array)
  std::vector<std::uint64_t> shape;
  bool fortran_order = false;     // irrelevant to a full reduction, recorded for completeness
  std::size_t data_offset = 0;    // bytes before the data
};

// Parses the header at the start of `data` (at least the whole header must be there).
// Throws tally::error naming what is wrong: bad magic, unknown version, malformed dictionary,
// an unsupported or big-endian dtype.
npy_header parse_npy_header(const unsigned char* data, std::size_t size);

// The numpy descr string for a dtype ("<f4", "<f2" for f16), the inverse of what parse accepts;
// "?" for bf16, which numpy cannot describe.
std::string npy_descr(dtype t);

// Builds a complete .npy file image (version 1.0) of a 1-d array; used by tests and tools.
std::vector<unsigned char> make_npy(dtype t, const void* data, std::uint64_t count);
// The same for an N-d array of `shape` (empty: a 0-d array of one element), C or Fortran order.
std::vector<unsigned char> make_npy(dtype t, const void* data, const std::vector<std::uint64_t>& shape,
                                    bool fortran_order = false);
// Writes such an image to `path` (replacing it); throws naming the path on any failure.
void write_npy(const std::string& path, dtype t, const void* data, const std::vector<std::uint64_t>& shape,
               bool fortran_order = false);

struct loaded_array {
  dtype type;
  std::uint64_t count;
  std::vector<unsigned char> bytes;  // count * dtype_size(type) bytes
  std::vector<std::uint64_t> shape;  // .npy: the header's shape; raw: {count}
  bool fortran_order = false;        // .npy: the header's order
};

// Throws tally::error unless path is a regular file this process can read: a missing file, a
// directory, a FIFO, socket or device, or one without read permission each say so by name.
void check_input_file(const std::string& path);

// An array in a file, opened to be read in pieces (the header read and checked against the file's
// size, the data not read): `tally reduce`, `stats` and `dot` stream it through a tally::reducer,
// so a file larger than host or GPU memory reduces. read() may be called from several threads.
class array_file {
 public:
  array_file(const std::string& path, int fd, dtype type, std::uint64_t count, std::vector<std::uint64_t> shape,
             bool fortran_order, std::uint64_t data_offset);
  ~array_file();
  array_file(array_file&& o) noexcept;
  array_file& operator=(array_file&&) = delete;
  array_file(const array_file&) = delete;
  array_file& operator=(const array_file&) = delete;

  const std::string& path() const noexcept { return path_; }
  dtype type() const noexcept { return type_; }
  std::uint64_t count() const noexcept { return count_; }
  const std::vector<std::uint64_t>& shape() const noexcept { return shape_; }
  bool fortran_order() const noexcept { return fortran_order_; }
  // Elements [first, first + count) into dst; throws naming the file if it cannot be read or has
  // become shorter since it was opened.
  void read(void* dst, std::uint64_t first, std::uint64_t count) const;
  // The elements mapped read-only into memory (mmap of the file, made on the first call, unmapped
  // with the object), for readers that take the data in place; null where the file cannot be
  // mapped (callers then read()). Not thread-safe on the first call. A file that shrinks while
  // mapped makes reads of the lost pages fault with SIGBUS (see cli/streamed.cpp).
  const void* mapped() const;

 private:
  std::string path_;
  int fd_ = -1;
  dtype type_;
  std::uint64_t count_ = 0;
  std::vector<std::uint64_t> shape_;
  bool fortran_order_ = false;
  std::uint64_t data_offset_ = 0;
  mutable void* map_ = nullptr;  // mapped(): the whole file, or MAP_FAILED once it failed
  mutable std::size_t map_bytes_ = 0;
};
// A .npy file (its size must match the header exactly) or a raw file of `type` elements.
array_file open_npy(const std::string& path);
array_file open_raw(const std::string& path, dtype type);
// Whether the file starts with numpy's magic bytes (false when it cannot be read).
bool has_npy_magic(const std::string& path);

// All of an opened file in host memory.
loaded_array read_all(const array_file& f);
// Reads a whole .npy file, checking that the data is exactly as long as the header says.
loaded_array read_npy(const std::string& path);
// Reads a raw little-endian file of `type` elements; its size must be a whole number of them.
loaded_array read_raw(const std::string& path, dtype type);

}  // namespace tally::io
