#include "io/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <utility>

namespace tally::io {
namespace {

[[noreturn]] void fail(const std::string& what) { throw error("npy: " + what); }

// The longest header open_npy reads (numpy's own reader stops at 10,000 bytes by default).
constexpr std::uint64_t kMaxNpyHeader = std::uint64_t(1) << 20;

constexpr unsigned char kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// The preamble: the magic, the version and the header's length (2 bytes in version 1, 4 in
// versions 2 and 3); the header starts at `start`.
struct npy_preamble {
  std::size_t start = 0;
  std::uint64_t header_len = 0;
};
npy_preamble read_preamble(const unsigned char* data, std::size_t size) {
  if (size < 10 || std::memcmp(data, kNpyMagic, 6) != 0) fail("not a .npy file (bad magic)");
  const int major = data[6];
  if (major == 1) return {10, std::uint64_t(data[8]) | std::uint64_t(data[9]) << 8};
  if (major != 2 && major != 3)
    fail("unsupported .npy version " + std::to_string(major) + "." + std::to_string(data[7]));
  if (size < 12) fail("truncated header");
  return {12, std::uint64_t(data[8]) | std::uint64_t(data[9]) << 8 | std::uint64_t(data[10]) << 16 |
                  std::uint64_t(data[11]) << 24};
}

struct descr_row {
  const char* descr;
  dtype type;
};
// '<' little-endian, '|' not applicable (one byte), '=' native (little-endian on x86-64 and Arm).
constexpr descr_row kDescrs[] = {
    {"b1", dtype::b8},  {"i1", dtype::i8},  {"u1", dtype::u8},  {"i2", dtype::i16},
    {"u2", dtype::u16}, {"i4", dtype::i32}, {"u4", dtype::u32}, {"i8", dtype::i64},
    {"u8", dtype::u64}, {"f2", dtype::f16}, {"f4", dtype::f32}, {"f8", dtype::f64}};
// numpy has no bfloat16 (ml_dtypes stores it as an opaque '<V2'): bf16 data comes as a raw file.

void skip_ws(const std::string& s, std::size_t& i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
}

std::string parse_quoted(const std::string& s, std::size_t& i) {
  skip_ws(s, i);
  if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("malformed header: expected a quoted string");
  const char q = s[i++];
  const std::size_t end = s.find(q, i);
  if (end == std::string::npos) fail("malformed header: unterminated string");
  std::string r = s.substr(i, end - i);
  i = end + 1;
  return r;
}

void expect(const std::string& s, std::size_t& i, char c) {
  skip_ws(s, i);
  if (i >= s.size() || s[i] != c) fail(std::string("malformed header: expected '") + c + "'");
  ++i;
}

}  // namespace

std::string npy_descr(dtype t) {
  for (const auto& r : kDescrs)
    if (r.type == t) return (dtype_size(t) == 1 ? "|" : "<") + std::string(r.descr);
  return "?";
}

npy_header parse_npy_header(const unsigned char* data, std::size_t size) {
  const npy_preamble pre = read_preamble(data, size);
  const std::size_t start = pre.start, header_len = static_cast<std::size_t>(pre.header_len);
  if (start + header_len > size) fail("truncated header");
  const std::string h(reinterpret_cast<const char*>(data + start), header_len);

  npy_header out;
  out.data_offset = start + header_len;
  bool have_descr = false, have_shape = false;
  std::size_t i = 0;
  expect(h, i, '{');
  while (true) {
    skip_ws(h, i);
    if (i < h.size() && h[i] == '}') break;
    const std::string key = parse_quoted(h, i);
    expect(h, i, ':');
    skip_ws(h, i);
    if (key == "descr") {
      const std::string d = parse_quoted(h, i);
      if (d.size() < 3) fail("unsupported dtype '" + d + "'");
      const char order = d[0];
      const std::string code = d.substr(1);
      bool found = false;
      for (const auto& r : kDescrs)
        if (code == r.descr) {
          const bool one_byte = dtype_size(r.type) == 1;
          if (order == '>' && !one_byte)
            fail("big-endian data ('" + d + "') is not supported; convert with .astype('<" + code + "')");
          if (order != '<' && order != '=' && order != '|' && !(order == '>' && one_byte))
            fail("unsupported dtype '" + d + "'");
          out.type = r.type;
          found = true;
        }
      if (!found) fail("unsupported dtype '" + d + "' (supported: bool, int8..int64, uint8..uint64, float16, float32, float64; "
                        "bfloat16 as a raw file with --dtype bf16)");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (h.compare(i, 4, "True") == 0) out.fortran_order = true, i += 4;
      else if (h.compare(i, 5, "False") == 0) out.fortran_order = false, i += 5;
      else fail("malformed header: fortran_order is not True or False");
    } else if (key == "shape") {
      expect(h, i, '(');
      out.shape.clear();
      while (true) {
        skip_ws(h, i);
        if (i < h.size() && h[i] == ')') { ++i; break; }
        if (i >= h.size() || !std::isdigit(static_cast<unsigned char>(h[i]))) fail("malformed header: bad shape");
        std::uint64_t v = 0;
        while (i < h.size() && std::isdigit(static_cast<unsigned char>(h[i]))) {
          const std::uint64_t d = static_cast<std::uint64_t>(h[i++] - '0');
          if (v > (UINT64_MAX - d) / 10) fail("malformed header: shape overflows");
          v = v * 10 + d;
        }
        out.shape.push_back(v);
        skip_ws(h, i);
        if (i < h.size() && h[i] == ',') ++i;
      }
      have_shape = true;
    } else {
      fail("malformed header: unknown key '" + key + "'");
    }
    skip_ws(h, i);
    if (i < h.size() && h[i] == ',') { ++i; continue; }
    skip_ws(h, i);
    if (i < h.size() && h[i] == '}') break;
    fail("malformed header: expected ',' or '}'");
  }
  if (!have_descr) fail("malformed header: no 'descr'");
  if (!have_shape) fail("malformed header: no 'shape'");
  // The product of the nonzero dimensions must fit 64 bits too (numpy refuses such a shape as
  // too big even with a zero among them); a zero dimension then makes the count 0.
  std::uint64_t nonzero = 1;
  bool zero = false;
  for (std::uint64_t d : out.shape) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (nonzero > UINT64_MAX / d) fail("malformed header: shape overflows 64 bits");
    nonzero *= d;
  }
  out.count = zero ? 0 : nonzero;
  return out;
}

std::vector<unsigned char> make_npy(dtype t, const void* data, std::uint64_t count) {
  return make_npy(t, data, std::vector<std::uint64_t>{count}, false);
}

std::vector<unsigned char> make_npy(dtype t, const void* data, const std::vector<std::uint64_t>& shape,
                                    bool fortran_order) {
  if (npy_descr(t) == "?") fail(std::string(to_string(t)) + " has no numpy dtype");
  std::string dims;  // (2, 3), (5,) and ()
  std::uint64_t count = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) dims += ", ";
    dims += std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '" + npy_descr(t) + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                     ", 'shape': (" + dims + "), }";
  std::size_t total = 10 + dict.size() + 1;
  const std::size_t pad = (64 - total % 64) % 64;
  dict += std::string(pad, ' ') + "\n";
  if (dict.size() > 0xffff) fail("header too long");
  const std::size_t data_bytes = count * dtype_size(t);
  std::vector<unsigned char> out(10 + dict.size() + data_bytes);
  const unsigned char lead[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                  static_cast<unsigned char>(dict.size() & 0xff),
                                  static_cast<unsigned char>(dict.size() >> 8)};
  std::memcpy(out.data(), lead, sizeof lead);
  std::memcpy(out.data() + 10, dict.data(), dict.size());
  if (data_bytes) std::memcpy(out.data() + 10 + dict.size(), data, data_bytes);
  return out;
}

void write_npy(const std::string& path, dtype t, const void* data, const std::vector<std::uint64_t>& shape,
               bool fortran_order) {
  const std::vector<unsigned char> img = make_npy(t, data, shape, fortran_order);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw error("cannot write '" + path + "': " + std::strerror(errno));
  f.write(reinterpret_cast<const char*>(img.data()), static_cast<std::streamsize>(img.size()));
  f.close();
  if (!f) throw error("writing '" + path + "' failed: " + std::strerror(errno));
}

void check_input_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw error("cannot open '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw error("'" + path + "' is a directory: give a file (.npy or raw)");
  if (!S_ISREG(st.st_mode))
    throw error("'" + path + "' is not a regular file (a FIFO, socket or device): tally reads files whose size it can "
                "check against their header");
  if (::access(path.c_str(), R_OK) != 0) throw error("cannot read '" + path + "': " + std::strerror(errno));
}

loaded_array read_all(const array_file& f) {
  loaded_array a{f.type(), f.count(), {}, f.shape(), f.fortran_order()};
  const std::uint64_t bytes = f.count() * dtype_size(f.type());  // open_* checked it against the file
  try {
    a.bytes.resize(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {  // the file's name and size, not a bare std::bad_alloc
    throw error("'" + f.path() + "': cannot hold its " + std::to_string(bytes) +
                " bytes of data in host memory (out of memory)");
  }
  f.read(a.bytes.data(), 0, f.count());
  return a;
}

loaded_array read_npy(const std::string& path) { return read_all(open_npy(path)); }

loaded_array read_raw(const std::string& path, dtype type) { return read_all(open_raw(path, type)); }

array_file::array_file(const std::string& path, int fd, dtype type, std::uint64_t count,
                       std::vector<std::uint64_t> shape, bool fortran_order, std::uint64_t data_offset)
    : path_(path), fd_(fd), type_(type), count_(count), shape_(std::move(shape)), fortran_order_(fortran_order),
      data_offset_(data_offset) {}

array_file::~array_file() {
  if (map_ != nullptr && map_ != MAP_FAILED) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

array_file::array_file(array_file&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), type_(o.type_), count_(o.count_), shape_(std::move(o.shape_)),
      fortran_order_(o.fortran_order_), data_offset_(o.data_offset_), map_(o.map_), map_bytes_(o.map_bytes_) {
  o.fd_ = -1;
  o.map_ = nullptr;
  o.map_bytes_ = 0;
}

const void* array_file::mapped() const {
  if (map_ == nullptr) {
    map_bytes_ = static_cast<std::size_t>(data_offset_ + count_ * dtype_size(type_));
    map_ = count_ == 0 ? MAP_FAILED : ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd_, 0);
  }
  if (map_ == MAP_FAILED) return nullptr;
  return static_cast<const unsigned char*>(map_) + data_offset_;
}

namespace {
// Reads bytes [at, at + want) of fd into dst, naming path on failure.
void pread_all(int fd, const std::string& path, unsigned char* dst, std::uint64_t want, std::uint64_t at,
               std::uint64_t whole) {
  std::uint64_t done = 0;
  while (done < want) {
    const std::size_t step = static_cast<std::size_t>(std::min<std::uint64_t>(want - done, std::uint64_t(1) << 30));
    const ssize_t got = ::pread(fd, dst + done, step, static_cast<off_t>(at + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw error("'" + path + "': cannot read at byte " + std::to_string(at + done) + ": " + std::strerror(errno));
    }
    if (got == 0)
      throw error("'" + path + "': the file ended at byte " + std::to_string(at + done) + ", before the " +
                  std::to_string(whole) + " bytes it held when opened (was it truncated meanwhile?)");
    done += static_cast<std::uint64_t>(got);
  }
}
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};
}  // namespace

void array_file::read(void* dst, std::uint64_t first, std::uint64_t count) const {
  const std::size_t es = dtype_size(type_);
  pread_all(fd_, path_, static_cast<unsigned char*>(dst), count * es, data_offset_ + first * es,
            data_offset_ + count_ * es);
}

namespace {
// Opens path for reading (after check_input_file's refusals) and gives its size.
int open_for_stream(const std::string& path, std::uint64_t& size) {
  check_input_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw error("'" + path + "': cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw error("'" + path + "': cannot stat: " + std::strerror(e));
  }
  size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}
}  // namespace

bool has_npy_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char m[sizeof kNpyMagic] = {};
  return f.read(reinterpret_cast<char*>(m), sizeof m) && std::memcmp(m, kNpyMagic, sizeof m) == 0;
}

array_file open_npy(const std::string& path) {
  std::uint64_t size = 0;
  fd_guard fd{open_for_stream(path, size)};
  // The preamble first, then the whole header: magic and version are checked before anything
  // else is read (a file of another kind once had up to 4 GiB read as its "header" first).
  std::vector<unsigned char> head(static_cast<std::size_t>(std::min<std::uint64_t>(size, 12)));
  pread_all(fd.fd, path, head.data(), head.size(), 0, size);
  const auto named = [&](auto&& step) {  // the parser's messages, prefixed with the file
    try {
      return step();
    } catch (const error& e) {
      throw error("'" + path + "': " + e.what());
    }
  };
  const npy_preamble pre = named([&] {
    const npy_preamble p = read_preamble(head.data(), head.size());
    if (p.header_len > kMaxNpyHeader)
      fail("the header says it is " + std::to_string(p.header_len) +
           " bytes long; tally reads headers of up to 1 MiB (numpy writes them under 10 KB)");
    return p;
  });
  head.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size, pre.start + pre.header_len)));
  pread_all(fd.fd, path, head.data(), head.size(), 0, size);
  const npy_header h = named([&] { return parse_npy_header(head.data(), head.size()); });
  const std::size_t es = dtype_size(h.type);
  const std::uint64_t have = size - h.data_offset;
  if (h.count > (UINT64_MAX / es) || h.count * es > have)
    throw error("'" + path + "': npy: truncated: the header promises " + std::to_string(h.count) + " elements (" +
                (h.count > UINT64_MAX / es ? std::string("more than 2^64") : std::to_string(h.count * es)) +
                " bytes) but only " + std::to_string(have) + " bytes of data follow");
  if (h.count * es < have)
    throw error("'" + path + "': npy: malformed: " + std::to_string(have - h.count * es) + " bytes follow the " +
                std::to_string(h.count) + " elements the header declares");
  return array_file(path, fd.release(), h.type, h.count, h.shape, h.fortran_order, h.data_offset);
}

array_file open_raw(const std::string& path, dtype type) {
  std::uint64_t size = 0;
  fd_guard fd{open_for_stream(path, size)};
  const std::size_t es = dtype_size(type);
  if (es == 0) throw error("raw: unknown dtype");
  if (size % es != 0)
    throw error("'" + path + "': raw: the file's " + std::to_string(size) + " bytes are not a whole number of " +
                to_string(type) + " elements (" + std::to_string(es) + " bytes each): truncated or the wrong --dtype");
  return array_file(path, fd.release(), type, size / es, {size / es}, false, 0);
}

}  // namespace tally::io
