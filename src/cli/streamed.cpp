#include "cli/streamed.hpp"

#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "cli/progress.hpp"

namespace tally::cli {
namespace {

// What feed_from's callback reads: input k of the current piece from files[k], starting at
// element `base` of the file.
struct file_pieces {
  const io::array_file* files[2] = {nullptr, nullptr};
  std::uint64_t base = 0;
};
void fill_from_files(void* context, int input, void* dst, std::uint64_t first, std::uint64_t count) {
  const auto* p = static_cast<const file_pieces*>(context);
  p->files[input]->read(dst, p->base + first, count);
}

// Feeds all of the files to r in pieces of 1 GiB, the last one taking the rest (1 to 2 GiB): each
// a whole number of the reducer's chunks and none short enough for smaller chunks
// (chunked::chunk_elements), so the result is that of one feed of the whole file. With a progress
// line.
void feed_files(reducer& r, const io::array_file* x, const io::array_file* y) {
  file_pieces pieces;
  pieces.files[0] = x;
  pieces.files[1] = y;
  const std::uint64_t es = dtype_size(x->type()), n = x->count();
  const std::uint64_t step = (std::uint64_t(1) << 30) / es;
  const double total_gib = static_cast<double>(n * es * (y ? 2 : 1)) / 1073741824.0;
  progress bar("reading " + x->path() + (y ? " and " + y->path() : std::string()));
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t at = 0;
  do {
    const std::uint64_t count = n - at < 2 * step ? n - at : step;
    pieces.base = at;
    r.feed_from(count, fill_from_files, &pieces);
    at += count;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double done = static_cast<double>(at * es * (y ? 2 : 1));
    bar.step(fmt::format("{:.1f} of {:.1f} GiB, {:.1f} GB/s", done / 1073741824.0, total_gib, done / s / 1e9));
  } while (at < n);
}

}  // namespace

bool is_npy_path(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
}

io::array_file open_array(const std::string& path, const std::string& dtype_name) {
  std::optional<dtype> t;
  if (!dtype_name.empty()) {
    t = parse_dtype(dtype_name);
    if (!t) throw error("unknown --dtype '" + dtype_name + "'");
  }
  if (is_npy_path(path)) {
    io::array_file f = io::open_npy(path);
    if (t && *t != f.type())
      throw error("'" + path + "' holds " + to_string(f.type()) + " data but --dtype says " + to_string(*t) +
                  " (--dtype is for raw files; a .npy file names its own)");
    return f;
  }
  io::check_input_file(path);  // a directory, FIFO or unreadable file says so before the missing --dtype
  if (!t) throw error("'" + path + "' is not a .npy file: give its element type with --dtype");
  return io::open_raw(path, *t);
}

value reduce_file(const io::array_file& f, op o, const options& opt) {
  reducer r = reducer::for_reduce(f.type(), o, opt);
  feed_files(r, &f, nullptr);
  return r.result();
}

stats stats_file(const io::array_file& f, const options& opt) {
  reducer r = reducer::for_stats(f.type(), opt);
  feed_files(r, &f, nullptr);
  return r.stats_result();
}

value dot_files(const io::array_file& x, const io::array_file& y, const options& opt) {
  reducer r = reducer::for_dot(x.type(), opt);
  feed_files(r, &x, &y);
  return r.result();
}

}  // namespace tally::cli
