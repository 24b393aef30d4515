#include "cli/streamed.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "chunked/head_start.hpp"
#include "cli/progress.hpp"

namespace tally::cli {
namespace {

// The progress line of a file command: bytes done of the whole, and the rate since the start.
std::string progress_line(double done_bytes, double total_gib, double seconds) {
  return fmt::format("{:.1f} of {:.1f} GiB, {:.1f} GB/s", done_bytes / 1073741824.0, total_gib,
                     done_bytes / seconds / 1e9);
}

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
    bar.step(progress_line(done, total_gib, s));
  } while (at < n);
}

// Seconds since this process started (/proc/self/stat's start time, in clock ticks since boot):
// where the command's fixed cost goes, for TALLY_DEBUG_HEAD_START. NaN where unreadable.
double process_age_s() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (!std::getline(f, line)) return std::nan("");
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nan("");
  std::istringstream in(line.substr(close + 1));
  std::string field;
  for (int k = 3; k <= 22; ++k) in >> field;  // field 22: starttime
  timespec now{};
  if (!in || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return std::nan("");
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec) -
         static_cast<double>(std::stoull(field)) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// While alive: SIGBUS (a mapped file read past its end after it shrank) ends the process with a
// message naming the file instead of a crash. The message is made before, the handler only writes.
char g_sigbus_message[512];
std::size_t g_sigbus_length = 0;
extern "C" void on_sigbus(int) {
  const ssize_t w = ::write(STDERR_FILENO, g_sigbus_message, g_sigbus_length);
  (void)w;
  std::_Exit(1);
}
struct sigbus_guard {
  struct sigaction old {};
  bool on = false;
  // Only while a file is read mapped (path non-empty).
  explicit sigbus_guard(const std::string& path) : on(!path.empty()) {
    if (!on) return;
    const int k = std::snprintf(g_sigbus_message, sizeof g_sigbus_message,
                                "tally: error: reading '%s' mapped failed (SIGBUS): the file became shorter while it "
                                "was being read, or its storage failed\n",
                                path.c_str());
    g_sigbus_length = k < 0 ? 0 : std::min<std::size_t>(static_cast<std::size_t>(k), sizeof g_sigbus_message - 1);
    struct sigaction sa {};
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &old);
  }
  ~sigbus_guard() {
    if (on) ::sigaction(SIGBUS, &old, nullptr);
  }
  sigbus_guard(const sigbus_guard&) = delete;
  sigbus_guard& operator=(const sigbus_guard&) = delete;
};

}  // namespace

bool is_npy_path(const std::string& path) {
  if (path.size() >= 4) {
    std::string ext = path.substr(path.size() - 4);
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".npy") return true;
  }
  // Any other name: a file that starts with numpy's magic is a .npy file (read as raw data with
  // --dtype, its header would have been taken for elements: numpy pads it to 64 bytes, so the
  // size divided evenly and the result was silently wrong).
  return io::has_npy_magic(path);
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
  const chunked::spec s{chunked::what::reduce, f.type(), o, opt};
  if (chunked::head_start_applies(s)) {
    // Float sums and means: the host's cores reduce the file from its start while CUDA starts,
    // exactly, and the GPU the rest (src/chunked/head_start.hpp).
    file_pieces pieces;
    pieces.files[0] = &f;
    const std::uint64_t es = dtype_size(f.type()), n = f.count();
    const double total_gib = static_cast<double>(n * es) / 1073741824.0;
    progress bar("reading " + f.path());
    const auto start = std::chrono::steady_clock::now();
    const char* debug = std::getenv("TALLY_DEBUG_HEAD_START");
    const double age = debug != nullptr && *debug != '\0' ? process_age_s() : 0.0;
    chunked::head_start_report report;
    // The host's threads read the file mapped, in place, instead of pread into buffers of their
    // own (a copy out of the page cache): a 2^31 f32 file from the page cache in 0.41-0.45 s
    // against 0.45-0.51 s with pread (H100 machine, 16 cores, 2026-11-26; the host summed all of
    // it before the GPU was ready). TALLY_HEAD_START_MAPPED=0: pread. A file cut short meanwhile
    // faults the threads with SIGBUS, which ends the command with that said.
    const char* map_env = std::getenv("TALLY_HEAD_START_MAPPED");
    const bool map = map_env == nullptr || std::strcmp(map_env, "0") != 0;
    const void* mapped = map ? f.mapped() : nullptr;
    const sigbus_guard guard(mapped != nullptr ? f.path() : std::string());
    const value v = chunked::reduce_with_head_start(
        s, n, fill_from_files, &pieces, 0,
        [&](std::uint64_t done) {
          const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const double bytes = static_cast<double>(done * es);
          bar.step(progress_line(bytes, total_gib, sec));
        },
        &report, mapped);
    if (debug != nullptr && *debug != '\0')
      fmt::print(stderr, "head start: the host's {} threads reduced {} of {} elements ({:.1f}%), the GPU was ready after "
                 "{:.3f} s, done after {:.3f} s (the process was {:.2f} s old at the start, {:.2f} s at the end)\n",
                 report.host_threads, report.host_elements, n,
                 n ? 100.0 * static_cast<double>(report.host_elements) / static_cast<double>(n) : 0.0,
                 report.gpu_ready_s, report.total_s, age, process_age_s());
    return v;
  }
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
