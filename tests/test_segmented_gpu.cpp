// Rows, columns, axes and ragged segments (src/segmented) against a CPU reference: every
// strategy of the plan (group, split, columns, exact), edge shapes, NaN and tie rules, exact mode
// bitwise equal to the 1-D exact reduce of each row, bad input, determinism and graph capture.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/api_internal.hpp"
#include "segmented/problem.hpp"
#include "segmented/segmented.hpp"
#include "support.hpp"
#include "tally/tally.hpp"

namespace tally::test {
namespace {

// The expected result of one range: a value (exact in double: the data are small integers) and,
// for argmin/argmax, the index inside the range (-1 when empty).
struct expect {
  double v = 0;
  std::int64_t index = -1;
  bool empty = false;
};

template <class T>
expect cpu_reduce(const std::vector<T>& x, const std::vector<std::uint64_t>& idx, op o) {
  expect r;
  r.empty = idx.empty();
  long double s = 0, sq = 0;
  std::uint64_t bx = 0;
  std::int64_t best = -1;
  for (std::uint64_t k = 0; k < idx.size(); ++k) {
    const T e = x[idx[k]];
    s += static_cast<long double>(e);
    sq += static_cast<long double>(e) * static_cast<long double>(e);
    if constexpr (std::is_integral_v<T>) bx ^= static_cast<std::uint64_t>(e);
    const bool lo = o == op::argmin || o == op::min;
    if (best < 0 || (lo ? e < x[idx[best]] : e > x[idx[best]])) best = static_cast<std::int64_t>(k);
  }
  switch (o) {
    case op::sum: r.v = static_cast<double>(s); break;
    case op::sum_sq: r.v = static_cast<double>(sq); break;
    case op::mean: r.v = idx.empty() ? std::nan("") : static_cast<double>(s) / static_cast<double>(idx.size()); break;
    case op::bit_xor: r.v = static_cast<double>(static_cast<T>(bx)); break;
    default:  // min, max, argmin, argmax
      if (best >= 0) r.v = static_cast<double>(x[idx[best]]);
      r.index = (o == op::argmin || o == op::argmax) ? best : -1;
  }
  return r;
}

// (Every element type named: a fallback once read int16_t as i64.)
template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) return dtype::f32;
  else if constexpr (std::is_same_v<T, double>) return dtype::f64;
  else if constexpr (std::is_same_v<T, std::int8_t>) return dtype::i8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return dtype::u8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return dtype::i16;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return dtype::u16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::i32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return dtype::u32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::i64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return dtype::u64;
  else static_assert(sizeof(T) == 0, "dtype_of: an element type without a dtype");
}

// Checks the results of one call (count results at d_out) against the reference per result.
template <class T>
void check_results(const char* what, const std::vector<T>& x, const std::vector<std::vector<std::uint64_t>>& ranges,
                   op o, const device_buffer& out) {
  const dtype t = dtype_of<T>();
  const std::vector<value> got = results_to_values(out.get(), ranges.size(), t, o);
  int shown = 0;
  for (std::size_t r = 0; r < ranges.size() && shown < 5; ++r) {
    const expect e = cpu_reduce(x, ranges[r], o);
    const bool arg = o == op::argmin || o == op::argmax;
    bool ok;
    if (e.empty && (o == op::min || o == op::max)) ok = got[r] == identity(t, o);
    else if (e.empty && arg) ok = got[r].index == -1;
    else if (std::isnan(e.v)) ok = std::isnan(got[r].as_double());
    else if (result_dtype(t, o) == dtype::f32) ok = got[r].as_double() == static_cast<double>(static_cast<float>(e.v));
    else ok = got[r].as_double() == e.v && (!arg || got[r].index == e.index);
    if (!ok) {
      ++shown;
      ADD_FAILURE() << what << " " << to_string(t) << " " << to_string(o) << ": result " << r << " of "
                    << ranges.size() << " (length " << ranges[r].size() << "): got " << got[r].to_string()
                    << " index " << got[r].index << ", want " << e.v << " index " << e.index << " (seed "
                    << test_seed() << ")";
    }
  }
}

template <class T>
std::vector<T> small_ints(std::uint64_t n, std::uint64_t seed) {
  if constexpr (std::is_unsigned_v<T>) return random_vector<T>(n, seed, 0, 15);
  else if constexpr (std::is_integral_v<T>) return random_vector<T>(n, seed, -8, 8);
  else {
    auto v = random_vector<T>(n, seed, -8, 9);
    for (auto& x : v) x = std::floor(x);  // integers: float sums are exact, results compare bitwise
    return v;
  }
}

// The elements of each segment [b[s], e[s]): the reference's ranges.
std::vector<std::vector<std::uint64_t>> segment_ranges(const std::vector<std::int64_t>& b,
                                                       const std::vector<std::int64_t>& e) {
  std::vector<std::vector<std::uint64_t>> ranges(b.size());
  for (std::size_t s = 0; s < b.size(); ++s)
    for (std::int64_t k = b[s]; k < e[s]; ++k) ranges[s].push_back(static_cast<std::uint64_t>(k));
  return ranges;
}

template <class T>
std::vector<op> ops_for() {
  std::vector<op> ops{op::sum, op::min, op::max, op::argmin, op::argmax, op::mean};
  if constexpr (std::is_floating_point_v<T>) ops.push_back(op::sum_sq);
  else ops.push_back(op::bit_xor);
  return ops;
}

// Rows of a rows x cols matrix with leading dimension ld, every op, against the reference.
template <class T>
void rows_case(std::uint64_t rows, std::uint64_t cols, std::uint64_t ld) {
  const std::uint64_t span = rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
  const auto x = small_ints<T>(std::max<std::uint64_t>(span, 1), test_seed() + rows * 31 + cols);
  device_buffer d(x.size() * sizeof(T));
  d.upload(x.data(), x.size() * sizeof(T));
  std::vector<std::vector<std::uint64_t>> ranges(rows), cranges(cols);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t c = 0; c < cols; ++c) ranges[r].push_back(r * ld + c), cranges[c].push_back(r * ld + c);
  for (op o : ops_for<T>()) {
    const dtype t = dtype_of<T>();
    device_buffer out(std::max<std::uint64_t>(rows, cols) * result_bytes(t, o) + 16);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols) + " ld " + std::to_string(ld);
    reduce_rows(d.get(), rows, cols, ld, t, o, out.get());
    check_results(("rows " + shape + " (" + seg::to_string(seg::last_plan().how) + ")").c_str(), x, ranges, o, out);
    reduce_columns(d.get(), rows, cols, ld, t, o, out.get());
    check_results(("columns " + shape + " (" + seg::to_string(seg::last_plan().how) + ")").c_str(), x, cranges, o, out);
  }
}

template <class T>
void rows_suite() {
  const std::uint64_t shapes[][3] = {
      {0, 5, 5}, {5, 0, 0}, {1, 1, 1}, {1, 1000, 1000}, {1000, 1, 3}, {3, 33, 35}, {64, 16, 16},
      {257, 7, 9}, {100, 256, 260}, {9, 4099, 4099}, {2, 200003, 200005}, {1000, 1, 1},
      {8, 1024, 1024}, {16, 4096, 4100}, {17, 300, 300},  // thin columns (16-byte loads), the first long axis
      {5, 2048, 2051}, {3, 16384, 16389},  // rows of 1024 vectors for f64 / u8: 256-thread split blocks
  };
  for (const auto& s : shapes) rows_case<T>(s[0], s[1], s[2]);
  for (std::uint64_t cols = 1; cols <= 33; ++cols) rows_case<T>(19, cols, cols + (cols % 3));
  if (!small_only()) {
    rows_case<T>(1u << 16, 16, 16);   // the group kernel, one lane per row
    rows_case<T>(5, 1u << 20, 1u << 20);  // split: several blocks per row
    rows_case<T>(1u << 12, 12, 16);   // 16-byte aligned rows of 12
    rows_case<T>(20000, 256, 256);    // columns: narrowed tiles, blocks sharing a tile's axis
    rows_case<T>(3000, 301, 301);     // columns: element loads, several blocks per tile
    rows_case<T>(18, 600000, 600000); // thin columns: enough results for every resident thread (f32)
  }
}

TEST(SegmentedGpu, RowsAndColumnsF32) { TALLY_REQUIRE_GPU(); rows_suite<float>(); }
TEST(SegmentedGpu, RowsAndColumnsF64) { TALLY_REQUIRE_GPU(); rows_suite<double>(); }
TEST(SegmentedGpu, RowsAndColumnsI32) { TALLY_REQUIRE_GPU(); rows_suite<std::int32_t>(); }
TEST(SegmentedGpu, RowsAndColumnsU8) { TALLY_REQUIRE_GPU(); rows_suite<std::uint8_t>(); }

// Axis k of a 4-D array, and two adjacent axes at once, against the reference.
TEST(SegmentedGpu, AxesOfA4DArray) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t dims[4] = {3, 5, 7, 9};
  const std::uint64_t n = 3 * 5 * 7 * 9;
  const auto x = small_ints<float>(n, test_seed() + 4);
  device_buffer d(n * 4);
  d.upload(x.data(), n * 4);
  for (int axis = 0; axis < 4; ++axis)
    for (int count = 1; axis + count <= 4; ++count) {
      std::uint64_t outer = 1, len = 1, inner = 1;
      for (int k = 0; k < 4; ++k) (k < axis ? outer : k < axis + count ? len : inner) *= dims[k];
      std::vector<std::vector<std::uint64_t>> ranges(outer * inner);
      for (std::uint64_t o = 0; o < outer; ++o)
        for (std::uint64_t i = 0; i < inner; ++i)
          for (std::uint64_t k = 0; k < len; ++k) ranges[o * inner + i].push_back((o * len + k) * inner + i);
      for (op o : {op::sum, op::argmax, op::min}) {
        device_buffer out(outer * inner * 16);
        reduce_axis(d.get(), dims, 4, axis, count, dtype::f32, o, out.get());
        check_results(("axis " + std::to_string(axis) + " count " + std::to_string(count)).c_str(), x, ranges, o, out);
      }
    }
}

// Ragged segments: heavy-tailed lengths with empty ones, overlapping and unordered ranges.
TEST(SegmentedGpu, RaggedSegments) {
  TALLY_REQUIRE_GPU();
  std::mt19937_64 rng(test_seed());
  for (std::uint64_t segments : {0ull, 1ull, 7ull, 1000ull, small_only() ? 2000ull : 50000ull}) {
    std::vector<std::int64_t> b, e;
    std::int64_t at = 0;
    for (std::uint64_t s = 0; s < segments; ++s) {
      const double u = std::uniform_real_distribution<double>(0, 1)(rng);
      const std::int64_t len = s % 5 == 0 ? 0 : static_cast<std::int64_t>(std::pow(u, 4.0) * (small_only() ? 3000 : 40000));
      b.push_back(at), e.push_back(at + len);
      at += len;
    }
    if (segments >= 7) {  // an overlapping and an out-of-order segment
      b[3] = 0, e[3] = std::min<std::int64_t>(at, 100);
      std::swap(b[5], b[6]), std::swap(e[5], e[6]);
    }
    const std::uint64_t n = static_cast<std::uint64_t>(std::max<std::int64_t>(at, 1));
    const auto x = small_ints<std::int32_t>(n, test_seed() + segments);
    device_buffer d(n * 4), db(segments * 8 + 8), de(segments * 8 + 8);
    d.upload(x.data(), n * 4);
    if (segments) db.upload(b.data(), segments * 8), de.upload(e.data(), segments * 8);
    std::vector<std::vector<std::uint64_t>> ranges(segments);
    for (std::uint64_t s = 0; s < segments; ++s)
      for (std::int64_t k = b[s]; k < e[s]; ++k) ranges[s].push_back(static_cast<std::uint64_t>(k));
    for (op o : {op::sum, op::max, op::argmin, op::bit_xor}) {
      device_buffer out(segments * 16 + 16);
      reduce_segments(d.get(), n, static_cast<const std::int64_t*>(db.get()), static_cast<const std::int64_t*>(de.get()),
                      segments, dtype::i32, o, out.get());
      check_results(("segments " + std::to_string(segments)).c_str(), x, ranges, o, out);
    }
  }
}

// The plan rule's inputs for the current GPU, as the library reads them.
seg::device_limits this_gpu_limits() { return seg::limits_for(core::current_context()); }

// The plan the sweep forces, for one call (the rule's again afterwards, also on a throw).
struct forced_plan {
  explicit forced_plan(const seg::plan& p) { seg::force_plan(&p); }
  ~forced_plan() { seg::force_plan(nullptr); }
  forced_plan(const forced_plan&) = delete;
  forced_plan& operator=(const forced_plan&) = delete;
};

// The sweep's last ragged candidate of strategy `how` for these f32 sums (a default plan: none).
seg::plan last_ragged_candidate(const std::int64_t* pb, const std::int64_t* pe, std::uint64_t segments, std::uint64_t n,
                                seg::strategy how) {
  seg::problem p;
  p.outer = segments, p.n = n, p.d_begin = pb, p.d_end = pe;
  seg::plan found;
  for (const seg::plan& c : seg::ragged_candidates(p, 4, 4, this_gpu_limits()))
    if (c.how == how) found = c;
  return found;
}

// A call captured into a CUDA graph on a stream of its own (`ok`: capture and instantiation
// worked); replay() launches the graph and waits for it. The stream's workspace goes with it.
struct captured_call {
  cudaStream_t st = nullptr;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  bool ok = false;
  explicit captured_call(const std::function<void(stream_t)>& call) {
    if (cudaStreamCreate(&st) != cudaSuccess || cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) != cudaSuccess)
      return;
    try {
      call(reinterpret_cast<stream_t>(st));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the captured call threw: " << e.what();
      cudaStreamEndCapture(st, &g);  // ends the capture (a later test must not find it open)
      return;
    }
    ok = cudaStreamEndCapture(st, &g) == cudaSuccess && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
  }
  bool replay() { return cudaGraphLaunch(ge, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess; }
  ~captured_call() {
    if (ge != nullptr) cudaGraphExecDestroy(ge);
    if (g != nullptr) cudaGraphDestroy(g);
    if (st != nullptr) {
      release_stream(reinterpret_cast<stream_t>(st));
      cudaStreamDestroy(st);
    }
  }
  captured_call(const captured_call&) = delete;
  captured_call& operator=(const captured_call&) = delete;
};

// Ragged segments in order (the chunked path for long ones): a heavy tail of lengths up to many
// chunks, empty segments, gaps between segments, segments ending or beginning on a chunk
// boundary; every op of the suite against the reference, and the same bits twice.
template <class T>
void ragged_in_order(std::uint64_t segments, std::uint64_t max_len) {
  std::mt19937_64 rng(test_seed() + segments);
  std::vector<std::int64_t> b, e;
  std::int64_t at = 0;
  for (std::uint64_t s = 0; s < segments; ++s) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    std::int64_t len = static_cast<std::int64_t>(std::pow(u, 6.0) * static_cast<double>(max_len));
    if (s % 7 == 0) len = 0;
    if (s % 11 == 3) at += static_cast<std::int64_t>(u * 40);  // a gap
    b.push_back(at), e.push_back(at + len);
    at += len;
  }
  const std::uint64_t n = static_cast<std::uint64_t>(std::max<std::int64_t>(at, 1));
  const auto x = small_ints<T>(n, test_seed() + segments * 7);
  device_buffer d(n * sizeof(T)), db(segments * 8 + 8), de(segments * 8 + 8);
  d.upload(x.data(), n * sizeof(T));
  if (segments) db.upload(b.data(), segments * 8), de.upload(e.data(), segments * 8);
  const auto ranges = segment_ranges(b, e);
  const dtype t = dtype_of<T>();
  for (op o : ops_for<T>()) {
    device_buffer out(segments * 16 + 16), again(segments * 16 + 16);
    const auto* pb = static_cast<const std::int64_t*>(db.get());
    const auto* pe = static_cast<const std::int64_t*>(de.get());
    reduce_segments(d.get(), n, pb, pe, segments, t, o, out.get());
    const seg::plan pl = seg::last_plan();
    check_results(("in-order segments " + std::to_string(segments) + " (" + pl.why + ")").c_str(), x, ranges, o, out);
    reduce_segments(d.get(), n, pb, pe, segments, t, o, again.get());
    const auto r1 = results_to_values(out.get(), segments, t, o), r2 = results_to_values(again.get(), segments, t, o);
    for (std::uint64_t s = 0; s < segments; ++s) ASSERT_EQ(r1[s], r2[s]) << "segment " << s;
  }
}

TEST(SegmentedGpu, RaggedInOrderLongSegments) {
  TALLY_REQUIRE_GPU();
  ragged_in_order<std::int32_t>(1, 100000);
  ragged_in_order<std::int32_t>(3000, small_only() ? 20000 : 400000);
  ragged_in_order<float>(3000, small_only() ? 20000 : 400000);
  ragged_in_order<double>(500, 100000);
  // One segment of the whole input and one per chunk boundary: lengths of exactly a chunk, one
  // more and one less, from a chunk's first element.
  const std::uint64_t n = small_only() ? (1u << 16) : (1u << 22);
  const auto x = small_ints<std::int32_t>(n, test_seed() + 5);
  device_buffer d(n * 4);
  d.upload(x.data(), n * 4);
  // The lane groups' plan (its chunks; few segments run as pieces by the rule), forced, and the rule.
  seg::problem q;
  static const std::int64_t fake = 0;
  q.outer = 6, q.n = n, q.d_begin = q.d_end = &fake;
  seg::plan groups;  // the widest lane groups with eight loads in flight, as the rule takes for few segments
  for (const seg::plan& cand : seg::ragged_candidates(q, 4, 8, seg::limits_for(core::current_context())))
    if (cand.how == seg::strategy::ragged && cand.tiles == 0 && cand.group == 32 && cand.unroll == 8 && groups.chunks == 0)
      groups = cand;
  ASSERT_GT(groups.chunks, 0u);
  const std::int64_t c = static_cast<std::int64_t>(groups.chunk);
  std::vector<std::int64_t> b{0, c, 2 * c + 1, 3 * c + 1, 5 * c, 0}, e{c, 2 * c + 1, 3 * c - 1, 5 * c, 5 * c, static_cast<std::int64_t>(n)};
  device_buffer db(b.size() * 8), de(e.size() * 8), out(b.size() * 16);
  // The last segment overlaps the others: the set is out of order and runs without chunks; the
  // first five alone are in order.
  for (std::uint64_t count : {std::uint64_t(5), std::uint64_t(6)}) {
    db.upload(b.data(), count * 8), de.upload(e.data(), count * 8);
    std::vector<std::vector<std::uint64_t>> ranges(count);
    for (std::uint64_t s = 0; s < count; ++s)
      for (std::int64_t k = b[s]; k < e[s]; ++k) ranges[s].push_back(static_cast<std::uint64_t>(k));
    for (op o : {op::sum, op::argmax, op::argmin, op::min})
      for (bool force : {false, true}) {
        std::unique_ptr<forced_plan> f;
        if (force) f = std::make_unique<forced_plan>(groups);
        reduce_segments(d.get(), n, static_cast<const std::int64_t*>(db.get()), static_cast<const std::int64_t*>(de.get()),
                        count, dtype::i32, o, out.get());
        f.reset();
        check_results(("chunk-boundary segments, chunk " + std::to_string(c) + " (" + seg::last_plan().why + ")").c_str(), x,
                      ranges, o, out);
      }
  }
}

// An input that is not 16-byte aligned (a view one element into a buffer): rows, columns and
// segments whose shapes would take vector loads from an aligned pointer fall back to element
// loads, with the same results.
TEST(SegmentedGpu, InputsNotSixteenByteAligned) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t rows = 3000, cols = 16;
  const auto x = small_ints<float>(rows * cols + 1, test_seed() + 99);
  device_buffer d(x.size() * 4);
  d.upload(x.data(), x.size() * 4);
  const float* in = static_cast<const float*>(d.get()) + 1;
  const std::vector<float> view(x.begin() + 1, x.end());
  std::vector<std::vector<std::uint64_t>> rr(rows), cr(cols);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t c = 0; c < cols; ++c) rr[r].push_back(r * cols + c), cr[c].push_back(r * cols + c);
  std::vector<std::int64_t> b(rows), e(rows);
  for (std::uint64_t r = 0; r < rows; ++r) b[r] = static_cast<std::int64_t>(r * cols), e[r] = b[r] + static_cast<std::int64_t>(cols);
  device_buffer db(rows * 8), de(rows * 8);
  db.upload(b.data(), rows * 8), de.upload(e.data(), rows * 8);
  for (op o : {op::sum, op::argmax, op::min}) {
    device_buffer out(rows * 16);
    reduce_rows(in, rows, cols, cols, dtype::f32, o, out.get());
    check_results(("unaligned rows (" + seg::last_plan().why + ")").c_str(), view, rr, o, out);
    reduce_columns(in, rows, cols, cols, dtype::f32, o, out.get());
    EXPECT_FALSE(seg::last_plan().vec);
    check_results(("unaligned columns (" + seg::last_plan().why + ")").c_str(), view, cr, o, out);
    reduce_segments(in, rows * cols, static_cast<const std::int64_t*>(db.get()), static_cast<const std::int64_t*>(de.get()),
                    rows, dtype::f32, o, out.get());
    check_results("unaligned segments", view, rr, o, out);
  }
}

// Exact sums of rows and segments are the 1-D exact reduce of each, bit for bit (wide-range data
// that flushes into the long accumulator, long rows run as 1-D launches, short rows by blocks).
TEST(SegmentedGpu, ExactRowsEqualOneDimensionalExact) {
  TALLY_REQUIRE_GPU();
  for (const auto& rc : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
           {37, 1000}, {3, 100003}, {200, 33}, {4, small_only() ? 70000 : (1u << 22) + 5}}) {
    const std::uint64_t rows = rc.first, cols = rc.second, n = rows * cols;
    std::mt19937_64 rng(test_seed() + n);
    std::vector<double> x(n);
    for (auto& v : x) v = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 120) - 60);
    std::vector<float> xf(x.begin(), x.end());
    device_buffer d64(n * 8), d32(n * 4), out(rows * 8);
    d64.upload(x.data(), n * 8);
    d32.upload(xf.data(), n * 4);
    options ex;
    ex.mode = accuracy::exact;
    for (dtype t : {dtype::f64, dtype::f32}) {
      const void* din = t == dtype::f64 ? d64.get() : d32.get();
      for (op o : {op::sum, op::mean}) {
        reduce_rows(din, rows, cols, cols, t, o, out.get(), nullptr, ex);
        const auto got = results_to_values(out.get(), rows, t, o);
        for (std::uint64_t r = 0; r < rows; ++r) {
          const value want = reduce_value(static_cast<const char*>(din) + r * cols * dtype_size(t), cols, t, o, nullptr, ex);
          ASSERT_EQ(got[r], want) << to_string(t) << " " << to_string(o) << " row " << r << " of " << rows << "x" << cols
                                  << " (" << seg::to_string(seg::last_plan().how) << "): " << got[r].to_string() << " vs "
                                  << want.to_string();
        }
      }
    }
  }
}

// NaN rules per row, and argmax ties across the blocks of one long row (the first index wins).
TEST(SegmentedGpu, NanPoliciesAndTiesAcrossBlocks) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t rows = 4, cols = small_only() ? 40000 : (1u << 21);
  std::vector<float> x(rows * cols, 1.0f);
  x[0 * cols + 17] = NAN;                             // row 0: a NaN
  for (std::uint64_t c = 0; c < cols; ++c) x[1 * cols + c] = NAN;  // row 1: all NaN
  x[2 * cols + cols - 1] = 5, x[2 * cols + cols / 2] = 5, x[2 * cols + 3] = 5;  // row 2: ties
  device_buffer d(x.size() * 4), out(rows * 16);
  d.upload(x.data(), x.size() * 4);
  reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::argmax, out.get());
  auto got = results_to_values(out.get(), rows, dtype::f32, op::argmax);
  EXPECT_EQ(got[0].index, 17);
  EXPECT_TRUE(std::isnan(got[0].as_double()));
  EXPECT_EQ(got[2].index, 3) << seg::to_string(seg::last_plan().how) << " per_seg " << seg::last_plan().per_seg;
  EXPECT_EQ(got[3].index, 0);
  options ig;
  ig.nan = nan_policy::ignore;
  reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::argmax, out.get(), nullptr, ig);
  got = results_to_values(out.get(), rows, dtype::f32, op::argmax);
  EXPECT_EQ(got[0].index, 0);
  EXPECT_EQ(got[1].index, -1);
  reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::max, out.get(), nullptr, ig);
  got = results_to_values(out.get(), rows, dtype::f32, op::max);
  EXPECT_EQ(got[0].as_double(), 1.0);
  EXPECT_TRUE(std::isnan(got[1].as_double()));
}

// Per-row statistics against a long double reference (random data).
TEST(SegmentedGpu, StatsPerRowAndColumn) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t rows = 300, cols = 257;
  const auto x = random_vector<double>(rows * cols, test_seed(), 1000, 1001);
  device_buffer d(x.size() * 8), out(std::max(rows, cols) * 48);
  d.upload(x.data(), x.size() * 8);
  for (int by_rows = 0; by_rows < 2; ++by_rows) {
    const std::uint64_t results = by_rows ? rows : cols, len = by_rows ? cols : rows;
    if (by_rows) stats_rows(d.get(), rows, cols, cols, dtype::f64, out.get());
    else stats_columns(d.get(), rows, cols, cols, dtype::f64, out.get());
    const auto got = stats_to_host(out.get(), results);
    for (std::uint64_t r = 0; r < results; ++r) {
      long double s = 0, m2 = 0;
      for (std::uint64_t k = 0; k < len; ++k) s += x[by_rows ? r * cols + k : k * cols + r];
      const long double mean = s / len;
      for (std::uint64_t k = 0; k < len; ++k) {
        const long double dlt = x[by_rows ? r * cols + k : k * cols + r] - mean;
        m2 += dlt * dlt;
      }
      ASSERT_EQ(got[r].count, len);
      EXPECT_NEAR(got[r].mean, static_cast<double>(mean), 1e-12 * 1001);
      EXPECT_NEAR(got[r].m2, static_cast<double>(m2), 1e-9 * static_cast<double>(m2) + 1e-12);
    }
  }
}

// The 1-D statistics' rules per row and per column: a row or column holding an infinity has
// that sum (NaN for both signs) and m2 NaN; its neighbours are untouched (docs/numerics.md).
TEST(SegmentedGpu, StatsRowsAndColumnsWithInfinities) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t rows = 64, cols = 1000;
  auto x = random_vector<double>(rows * cols, test_seed(), -1, 1);
  x[3 * cols + 17] = HUGE_VAL;                                    // row 3, column 17
  x[9 * cols + 500] = HUGE_VAL, x[9 * cols + 999] = -HUGE_VAL;   // row 9: both signs
  device_buffer d(x.size() * 8), out(std::max(rows, cols) * 48);
  d.upload(x.data(), x.size() * 8);
  stats_rows(d.get(), rows, cols, cols, dtype::f64, out.get());
  const auto r = stats_to_host(out.get(), rows);
  EXPECT_EQ(r[3].sum, HUGE_VAL);
  EXPECT_EQ(r[3].max, HUGE_VAL);
  EXPECT_TRUE(std::isnan(r[3].m2));
  EXPECT_TRUE(std::isnan(r[9].sum) && std::isnan(r[9].mean) && std::isnan(r[9].m2));
  EXPECT_EQ(r[9].min, -HUGE_VAL);
  for (std::uint64_t i : {std::uint64_t(0), std::uint64_t(4), rows - 1})
    EXPECT_TRUE(std::isfinite(r[i].m2) && r[i].m2 > 0) << "row " << i;
  stats_columns(d.get(), rows, cols, cols, dtype::f64, out.get());
  const auto c = stats_to_host(out.get(), cols);
  EXPECT_EQ(c[17].sum, HUGE_VAL);
  EXPECT_TRUE(std::isnan(c[17].m2));
  EXPECT_EQ(c[999].sum, -HUGE_VAL);
  EXPECT_TRUE(std::isnan(c[999].m2));
  EXPECT_EQ(c[500].max, HUGE_VAL);
  for (std::uint64_t i : {std::uint64_t(0), std::uint64_t(18), cols - 2})
    EXPECT_TRUE(std::isfinite(c[i].m2) && c[i].m2 > 0) << "column " << i;
  // Rows of two: a lane a row in the row tiles, whose accumulator is never merged; before the
  // rule a row {0.5, inf} kept s1 = s2 = inf there and m2 read inf.
  const std::uint64_t pairs = 4096;
  std::vector<double> y(pairs * 2, 0.25);
  y[1] = 0.5, y[2 * 7 + 1] = HUGE_VAL, y[2 * 8] = -HUGE_VAL, y[2 * 9] = HUGE_VAL, y[2 * 9 + 1] = -HUGE_VAL;
  device_buffer dy(y.size() * 8), outy(pairs * 48);
  dy.upload(y.data(), y.size() * 8);
  stats_rows(dy.get(), pairs, 2, 2, dtype::f64, outy.get());
  const auto p = stats_to_host(outy.get(), pairs);
  EXPECT_DOUBLE_EQ(p[0].m2, 0.03125);  // {0.25, 0.5}: mean 0.375, m2 2 x 0.125^2
  EXPECT_EQ(p[1].m2, 0.0);
  EXPECT_EQ(p[7].sum, HUGE_VAL);
  EXPECT_TRUE(std::isnan(p[7].m2)) << "row {0.25, inf}: m2 " << p[7].m2;
  EXPECT_EQ(p[8].sum, -HUGE_VAL);
  EXPECT_TRUE(std::isnan(p[8].m2)) << "row {-inf, 0.25}: m2 " << p[8].m2;
  EXPECT_TRUE(std::isnan(p[9].sum) && std::isnan(p[9].m2));
  EXPECT_EQ(p[9].min, -HUGE_VAL);
  EXPECT_EQ(p[9].max, HUGE_VAL);
}

// Bad input: a clear error before anything runs, or (offsets) nothing written.
TEST(SegmentedGpu, BadOffsetsWriteNothing) {
  TALLY_REQUIRE_GPU();
  const std::vector<float> x(100, 1.0f);
  device_buffer d(400), db(24), de(24), out(12);
  d.upload(x.data(), 400);
  const std::int64_t b[3] = {0, 50, 10}, e[3] = {10, 40, 20};  // segment 1 out of order
  db.upload(b, 24), de.upload(e, 24);
  const std::vector<float> sentinel(3, -7.0f);
  out.upload(sentinel.data(), 12);
  reduce_segments(d.get(), 100, static_cast<const std::int64_t*>(db.get()), static_cast<const std::int64_t*>(de.get()), 3,
                  dtype::f32, op::sum, out.get());
  const auto got = results_to_values(out.get(), 3, dtype::f32, op::sum);
  for (const auto& v : got) EXPECT_EQ(v.as_double(), -7.0);
  const std::string why = error_of([&] {
    check_segments(static_cast<const std::int64_t*>(db.get()), static_cast<const std::int64_t*>(de.get()), 3, 100);
  });
  EXPECT_NE(why.find("segment 1 [50, 40)"), std::string::npos) << why;
  const std::int64_t e2[3] = {10, 60, 101};  // past n
  de.upload(e2, 24);
  EXPECT_NE(error_of([&] {
              reduce_segments_values(d.get(), 100, static_cast<const std::int64_t*>(db.get()),
                                     static_cast<const std::int64_t*>(de.get()), 3, dtype::f32, op::sum);
            }).find("segment 2 [10, 101): end is past n = 100"),
            std::string::npos);
  // The stream stays usable.
  EXPECT_EQ(reduce_value(d.get(), 100, dtype::f32, op::sum).as_double(), 100.0);
}

// Same shape twice: the same bits (float sums of random data, split and group plans); and a
// captured graph gives the same results as the direct call.

// Thin columns with four vectors of results per thread: a short axis and more than four vectors
// of columns per resident thread (the plan rule's threshold, from this GPU's properties), the
// last vectors past the grid's multiple.
TEST(SegmentedGpu, ThinColumnsFourVectorsPerThread) {
  TALLY_REQUIRE_GPU();
  const seg::device_limits lim = this_gpu_limits();
  const std::uint64_t rows = 3, cols = 4 * 4 * std::uint64_t(lim.sm_count) * std::uint64_t(lim.max_threads_per_sm) + 36;
  const auto x = small_ints<float>(rows * cols, test_seed() + 44);
  device_buffer d(x.size() * 4), out(cols * 4);
  d.upload(x.data(), x.size() * 4);
  for (op o : {op::sum, op::max, op::sum_sq}) {
    reduce_columns(d.get(), rows, cols, cols, dtype::f32, o, out.get());
    const seg::plan pl = seg::last_plan();
    EXPECT_EQ(pl.how, seg::strategy::thin);
    EXPECT_EQ(pl.group, seg::kThinWide);
    EXPECT_TRUE(pl.vec);
    std::vector<float> got(cols);
    ASSERT_EQ(cudaMemcpy(got.data(), out.get(), cols * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    std::uint64_t bad = 0, first = 0;
    for (std::uint64_t c = 0; c < cols; ++c) {
      float want = o == op::max ? x[c] : 0.0f;
      for (std::uint64_t r = 0; r < rows; ++r) {
        const float e = x[r * cols + c];
        want = o == op::sum ? want + e : o == op::sum_sq ? want + e * e : std::max(want, e);
      }
      if (got[c] != want && bad++ == 0) first = c;
    }
    EXPECT_EQ(bad, 0u) << to_string(o) << ": first wrong column " << first << " of " << cols;
  }
}

// Every plan the benchmark's sweep may force on a column problem gives the right results
// (16-byte and element loads; sum and argmax, whose ties go to the first row).
TEST(SegmentedGpu, EveryColumnCandidateIsRight) {
  TALLY_REQUIRE_GPU();
  const seg::device_limits lim = this_gpu_limits();
  for (const auto& shape : {std::pair<std::uint64_t, std::uint64_t>{2000, 256}, {3000, 301}}) {
    const std::uint64_t rows = shape.first, cols = shape.second;
    const auto x = small_ints<float>(rows * cols, test_seed() + rows);
    device_buffer d(x.size() * 4);
    d.upload(x.data(), x.size() * 4);
    std::vector<std::vector<std::uint64_t>> cranges(cols);
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t c = 0; c < cols; ++c) cranges[c].push_back(r * cols + c);
    seg::problem p;
    p.outer = 1, p.length = rows, p.inner = cols, p.length_stride = cols;
    p.aligned16 = reinterpret_cast<std::uintptr_t>(d.get()) % 16 == 0;
    for (op o : {op::sum, op::argmax}) {
      const int acc = o == op::sum ? 4 : 16;
      seg::device_limits l = lim;  // the f32 sum's 16-byte tiles also have the lean columns kernel
      l.columns_lean = o == op::sum && seg::lean_available(dtype::f32, core::kind::sum, seg::lean_kernel::columns,
                                                           core::current_context());
      for (const seg::plan& c : seg::column_candidates(p, 4, acc, l)) {
        device_buffer out(cols * 16);
        const std::vector<unsigned char> poison(cols * 16, 0xFF);  // a column never written shows
        out.upload(poison.data(), poison.size());
        {
          const forced_plan f(c);
          reduce_columns(d.get(), rows, cols, cols, dtype::f32, o, out.get());
        }
        const std::string what = "columns " + std::to_string(rows) + "x" + std::to_string(cols) + " forced " +
                                 seg::to_string(c.how) + " c" + std::to_string(c.col_vecs) + " x" + std::to_string(c.per_seg) +
                                 " m" + std::to_string(c.group) + (c.col_ring ? " r" : "") + (c.col_lean ? " lean" : "");
        check_results(what.c_str(), x, cranges, o, out);
      }
    }
  }
}

// Column tiles with two rounds of loads in flight a lane give the bits of their one-round plan:
// random floats, f32 sum, max and mean, axes of whole rounds and of a partial last one, one or
// several blocks a tile (candidates made for two blocks an SM, as the sweep counts the f32
// sum's kernel), rows 16-byte aligned (the twins need 16-byte loads); every output word written.
TEST(SegmentedGpu, ColumnRingMatchesOneRoundBitwise) {
  TALLY_REQUIRE_GPU();
  seg::device_limits lim = this_gpu_limits();
  lim.columns_blocks_per_sm = 2;
  int pairs = 0, shared = 0;
  for (const auto& shape : {std::pair<std::uint64_t, std::uint64_t>{2048, 256}, {1999, 512}, {517, 1024}}) {
    const std::uint64_t rows = shape.first, cols = shape.second;
    const auto x = random_vector<float>(rows * cols, test_seed() + rows + 7, -1, 1);
    device_buffer d(x.size() * 4);
    d.upload(x.data(), x.size() * 4);
    seg::problem p;
    p.outer = 1, p.length = rows, p.inner = cols, p.length_stride = cols;
    p.aligned16 = reinterpret_cast<std::uintptr_t>(d.get()) % 16 == 0;
    const auto cands = seg::column_candidates(p, 4, 4, lim);
    for (op o : {op::sum, op::max, op::mean}) {
      const auto run = [&](const seg::plan& c) {
        std::vector<float> h(cols);
        device_buffer out(cols * 4);
        const std::vector<unsigned char> poison(cols * 4, 0xFF);
        out.upload(poison.data(), poison.size());
        {
          const forced_plan f(c);
          reduce_columns(d.get(), rows, cols, cols, dtype::f32, o, out.get());
        }
        out.download(h.data(), cols * 4);
        return h;
      };
      for (std::size_t i = 1; i < cands.size(); ++i) {
        if (!cands[i].col_ring) continue;
        ++pairs;
        shared += cands[i].per_seg > 1;
        const auto ring = run(cands[i]), one = run(cands[i - 1]);
        const std::string what = std::string(to_string(o)) + " " + std::to_string(rows) + " x " + std::to_string(cols) + " c" +
                                 std::to_string(cands[i].col_vecs) + " x" + std::to_string(cands[i].per_seg) +
                                 " (seed " + std::to_string(test_seed()) + ")";
        EXPECT_EQ(std::memcmp(ring.data(), one.data(), cols * 4), 0) << what;
        std::uint64_t unwritten = 0;
        for (float v : ring) {
          std::uint32_t bits;
          std::memcpy(&bits, &v, 4);
          unwritten += bits == 0xFFFFFFFFu;
        }
        EXPECT_EQ(unwritten, 0u) << what;
      }
    }
  }
  EXPECT_GT(pairs, 10);
  EXPECT_GT(shared, 3) << "twins of several blocks a tile";
}

// Every plan the benchmark's sweep may force on rows gives the right results: lane groups, 256-
// and 512-thread blocks, one or several per row (the several-blocks combine of 256-thread blocks
// is reachable only this way), rows 16-byte aligned or not (ld), sum and argmax.
TEST(SegmentedGpu, EveryRowCandidateIsRight) {
  TALLY_REQUIRE_GPU();
  const seg::device_limits lim = this_gpu_limits();
  // Row tiles (1, 2, 4 and 16 vectors a row, a last warp short of rows, a row stride past the
  // row), lane groups with four and eight loads in flight, split blocks.
  const std::uint64_t shapes[][3] = {{24, 4096, 4096}, {7, 16384, 16387}, {40, 2048, 2048}, {300, 256, 257},
                                     {1001, 16, 20},   {333, 64, 64},     {77, 4, 4},        {555, 8, 8},
                                     {999, 32, 32}};
  for (const auto& sh : shapes) {
    const std::uint64_t rows = sh[0], cols = sh[1], ld = sh[2];
    const auto x = small_ints<float>(rows * ld, test_seed() + cols);
    device_buffer d(x.size() * 4);
    d.upload(x.data(), x.size() * 4);
    std::vector<std::vector<std::uint64_t>> ranges(rows);
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t c = 0; c < cols; ++c) ranges[r].push_back(r * ld + c);
    seg::problem p;
    p.outer = rows, p.length = cols, p.inner = 1, p.outer_stride = ld;
    p.aligned16 = reinterpret_cast<std::uintptr_t>(d.get()) % 16 == 0;
    for (op o : {op::sum, op::argmax}) {
      const int acc = o == op::sum ? 4 : 16;
      seg::device_limits l = lim;  // the f32 sum's rows of whole aligned vectors also have the lean split kernel
      l.split_lean = o == op::sum &&
                seg::lean_available(dtype::f32, core::kind::sum, seg::lean_kernel::split, core::current_context());
      const auto cands = seg::row_candidates(p, 4, acc, l);
      ASSERT_FALSE(cands.empty());
      for (const seg::plan& c : cands) {
        device_buffer out(rows * 16);
        {
          const forced_plan f(c);
          reduce_rows(d.get(), rows, cols, ld, dtype::f32, o, out.get());
        }
        const seg::plan ran = seg::last_plan();
        EXPECT_TRUE(ran.how == c.how && ran.group == c.group && ran.per_seg == c.per_seg &&
                    ran.split_block == c.split_block && ran.split_lean == c.split_lean && ran.unroll == c.unroll);
        const std::string what = "rows " + std::to_string(rows) + "x" + std::to_string(cols) + " ld " + std::to_string(ld) +
                                 " forced " + seg::to_string(c.how) + " g" + std::to_string(c.group) + " b" +
                                 std::to_string(c.split_block) + (c.split_lean ? " lean" : "") + " x" +
                                 std::to_string(c.per_seg) + " u" + std::to_string(c.unroll);
        check_results(what.c_str(), x, ranges, o, out);
      }
    }
  }
}

// Four or eight loads (row steps) in flight per lane change the speed, never the bits: every
// lane group and row tile forced with each, on random floats (whose sums depend on the order),
// f32 and f64, sum and mean (the 8-byte results take the row tiles' gathered store too).
template <class T>
void loads_in_flight_same_bits() {
  const seg::device_limits lim = this_gpu_limits();
  constexpr int eb = sizeof(T);
  const std::uint64_t shapes[][2] = {{1001, 64 / eb * 4}, {700, 128 / eb * 4}, {300, 256 / eb * 4}, {2049, 16 / eb * 4},
                                     {555, 8 / eb * 4},   {999, 32 / eb * 4}};
  for (const auto& sh : shapes) {
    const std::uint64_t rows = sh[0], cols = sh[1];
    const auto x = random_vector<T>(rows * cols, test_seed() + cols, -1, 1);
    device_buffer d(x.size() * eb);
    d.upload(x.data(), x.size() * eb);
    seg::problem p;
    p.outer = rows, p.length = cols, p.inner = 1, p.outer_stride = cols;
    p.aligned16 = reinterpret_cast<std::uintptr_t>(d.get()) % 16 == 0;
    for (op o : {op::sum, op::mean}) {
      const auto cands = seg::row_candidates(p, eb, eb, lim);
      int pairs = 0;
      for (std::size_t i = 0; i < cands.size(); ++i)
        for (std::size_t j = 0; j < cands.size(); ++j) {
          const seg::plan &a = cands[i], &b = cands[j];
          if (a.unroll != 4 || b.unroll != 8 || a.how != b.how || a.group != b.group) continue;
          std::vector<unsigned char> ha(rows * 16), hb(rows * 16);
          device_buffer oa(rows * 16), ob(rows * 16);
          {
            const forced_plan f(a);
            reduce_rows(d.get(), rows, cols, cols, dtype_of<T>(), o, oa.get());
          }
          {
            const forced_plan f(b);
            reduce_rows(d.get(), rows, cols, cols, dtype_of<T>(), o, ob.get());
          }
          const std::size_t bytes = rows * dtype_size(result_dtype(dtype_of<T>(), o));
          oa.download(ha.data(), bytes);
          ob.download(hb.data(), bytes);
          EXPECT_EQ(std::memcmp(ha.data(), hb.data(), bytes), 0)
              << "rows " << rows << " x " << cols << " " << to_string(dtype_of<T>()) << " " << to_string(o) << " "
              << seg::to_string(a.how) << " g" << a.group << ": four and eight in flight differ (seed " << test_seed()
              << ")";
          ++pairs;
        }
      EXPECT_GT(pairs, 0) << "rows " << rows << " x " << cols;
    }
  }
}
TEST(SegmentedGpu, LoadsInFlightChangeNoBits) {
  TALLY_REQUIRE_GPU();
  loads_in_flight_same_bits<float>();
  loads_in_flight_same_bits<double>();
}

// A flat grid (plan::flat: a block for each share of rows its warps take in one pass) reads every
// row once as the resident grid does, with each row's lanes and order unchanged: every row-tile
// and lane-group candidate forced both ways on rows enough for several waves of blocks (rows of
// 16 f32 in a stride of 20, of 4, 32, 64 and 256: row tiles of 4, 1, 8 and 16 lanes a row, four
// and eight steps, lane groups), a last block short of rows. Random floats: the sums'
// bits equal; small integers: sums and argmax against the reference.
TEST(SegmentedGpu, FlatRowGridsGiveTheResidentGridsBits) {
  TALLY_REQUIRE_GPU();
  const seg::device_limits lim = this_gpu_limits();
  // (Under TALLY_TEST_SMALL, 2^16 elements and fewer: one pass for either grid.)
  const bool small = small_only();
  const std::uint64_t shapes[][3] = {{small ? 3001 : (1u << 21) + 77, 16, 20},
                                     {small ? 4003 : (1u << 21) + 5, 4, 4},
                                     {small ? 1001 : (1u << 20) + 9, 32, 32},
                                     {small ? 999 : (1u << 20) + 3, 64, 64},
                                     {small ? 255 : (1u << 15) + 3, 256, 256}};
  for (const auto& sh : shapes) {
    const std::uint64_t rows = sh[0], cols = sh[1], ld = sh[2];
    const auto xr = random_vector<float>(rows * ld, test_seed() + cols, -1, 1);
    const auto xi = small_ints<float>(rows * ld, test_seed() + cols + 1);
    device_buffer dr(xr.size() * 4), di(xi.size() * 4);
    dr.upload(xr.data(), xr.size() * 4);
    di.upload(xi.data(), xi.size() * 4);
    seg::problem p;
    p.outer = rows, p.length = cols, p.inner = 1, p.outer_stride = ld;
    p.aligned16 = reinterpret_cast<std::uintptr_t>(dr.get()) % 16 == 0 && reinterpret_cast<std::uintptr_t>(di.get()) % 16 == 0;
    // The references of the small integers (exact in f32): sums, and argmax as the first largest.
    std::vector<double> sum_ref(rows);
    std::vector<std::int64_t> arg_ref(rows);
    for (std::uint64_t r = 0; r < rows; ++r) {
      double s = 0;
      std::uint64_t best = 0;
      for (std::uint64_t c = 0; c < cols; ++c) {
        s += xi[r * ld + c];
        if (xi[r * ld + c] > xi[r * ld + best]) best = c;
      }
      sum_ref[r] = s;
      arg_ref[r] = static_cast<std::int64_t>(best);
    }
    int flats = 0;
    for (op o : {op::sum, op::argmax}) {
      for (const seg::plan& c : seg::row_candidates(p, 4, o == op::sum ? 4 : 16, lim)) {
        if ((c.how != seg::strategy::rowtile && c.how != seg::strategy::group) || c.flat) continue;
        seg::plan f = c;
        ASSERT_TRUE(seg::make_flat(f, rows));
        const std::string what = "rows " + std::to_string(rows) + " x " + std::to_string(cols) + " ld " +
                                 std::to_string(ld) + " " + to_string(o) + " " + seg::to_string(c.how) + " g" +
                                 std::to_string(c.group) + " u" + std::to_string(c.unroll) + " flat grid " +
                                 std::to_string(f.blocks) + " (seed " + std::to_string(test_seed()) + ")";
        const std::size_t unit = o == op::sum ? 4 : 16;
        std::vector<unsigned char> h[2];
        for (int k = 0; k < 2; ++k) {
          device_buffer out(rows * unit);
          const forced_plan fp(k == 0 ? c : f);
          if (o == op::sum) {  // random floats: the two grids' bits
            reduce_rows(dr.get(), rows, cols, ld, dtype::f32, o, out.get());
            h[k].resize(rows * unit);
            out.download(h[k].data(), rows * unit);
          }
          reduce_rows(di.get(), rows, cols, ld, dtype::f32, o, out.get());
          EXPECT_EQ(seg::last_plan().flat, k == 1) << what;
          const std::vector<value> got = results_to_values(out.get(), rows, dtype::f32, o);
          std::uint64_t bad = 0, first = rows;
          for (std::uint64_t r = 0; r < rows; ++r) {
            const bool ok = o == op::sum ? got[r].as_double() == sum_ref[r] : got[r].index == arg_ref[r];
            if (!ok && bad++ == 0) first = r;
          }
          EXPECT_EQ(bad, 0u) << what << (k == 1 ? " flat" : " resident") << ": first wrong row " << first;
        }
        if (o == op::sum) {
          EXPECT_EQ(std::memcmp(h[0].data(), h[1].data(), rows * 4), 0) << what << ": the grids' bits differ";
        }
        ++flats;
      }
    }
    EXPECT_GE(flats, 2) << "rows " << rows << " x " << cols;
  }
}

// Every ragged plan the sweep times (lane groups of 1-32 lanes, four and eight loads in flight
// and four eagerly, chunks of a quarter to four times the rule's) on heavy-tailed in-order
// segments with empty ones and gaps: small integers (sum, argmax with ties) against the
// reference, and on random floats four in flight, eight and eager give the same bits.
TEST(SegmentedGpu, EveryRaggedCandidateIsRight) {
  TALLY_REQUIRE_GPU();
  const seg::device_limits lim = this_gpu_limits();
  for (std::uint64_t segments : {std::uint64_t(37), std::uint64_t(2000)}) {
    std::mt19937_64 rng(test_seed() + segments);
    std::vector<std::int64_t> b, e;
    std::int64_t at = 0;
    for (std::uint64_t s = 0; s < segments; ++s) {
      const double u = std::uniform_real_distribution<double>(1e-4, 1.0)(rng);
      std::int64_t len = static_cast<std::int64_t>(8.0 * std::pow(u, -1.0 / 1.2));  // Pareto, up to ~17000
      if (s % 5 == 0) len = 0;
      if (s % 13 == 4) at += 3;  // a gap
      b.push_back(at), e.push_back(at + len);
      at += len;
    }
    const std::uint64_t n = static_cast<std::uint64_t>(at);
    const auto xi = small_ints<float>(n, test_seed() + segments * 3);
    const auto xf = random_vector<float>(n, test_seed() + segments * 5, -1, 1);
    device_buffer di(n * 4), df(n * 4), db(segments * 8), de(segments * 8);
    di.upload(xi.data(), n * 4), df.upload(xf.data(), n * 4);
    db.upload(b.data(), segments * 8), de.upload(e.data(), segments * 8);
    const auto* pb = static_cast<const std::int64_t*>(db.get());
    const auto* pe = static_cast<const std::int64_t*>(de.get());
    const auto ranges = segment_ranges(b, e);
    seg::problem p;
    p.outer = segments, p.n = n, p.d_begin = pb, p.d_end = pe;
    for (op o : {op::sum, op::argmax}) {
      const auto cands = seg::ragged_candidates(p, 4, o == op::sum ? 4 : 16, lim);
      ASSERT_GE(cands.size(), 13u);
      EXPECT_GT(cands[0].tiles, 0u);
      for (const seg::plan& c : cands) {
        device_buffer out(segments * 16);
        {
          const forced_plan f(c);
          reduce_segments(di.get(), n, pb, pe, segments, dtype::f32, o, out.get());
        }
        const seg::plan ran = seg::last_plan();
        EXPECT_TRUE(ran.how == c.how && ran.group == c.group && ran.chunk == c.chunk && ran.unroll == c.unroll &&
                    ran.eager == c.eager && ran.span == c.span);
        EXPECT_EQ(std::string(seg::last_kernel()).find("(eager)") != std::string::npos, c.eager) << seg::last_kernel();
        const std::string what = "ragged " + std::to_string(segments) + " forced g" + std::to_string(c.group) +
                                 " chunk " + std::to_string(c.chunk) + " u" + std::to_string(c.unroll) +
                                 (c.eager ? " eager" : "") + (c.span ? " span " + std::to_string(c.span) : "");
        check_results(what.c_str(), xi, ranges, o, out);
      }
    }
    const auto cands = seg::ragged_candidates(p, 4, 4, lim);
    int pairs = 0;
    for (const seg::plan& a : cands)
      for (const seg::plan& c : cands) {
        // Four in flight against eight, and against four issued eagerly: the same bits.
        if (a.tiles != 0 || c.tiles != 0 || a.span != 0 || c.span != 0 || a.unroll != 4 || a.eager ||
            (c.unroll != 8 && !c.eager) || a.group != c.group || a.chunk != c.chunk)
          continue;
        ++pairs;
        std::vector<float> ha(segments), hc(segments);
        device_buffer oa(segments * 4), oc(segments * 4);
        {
          const forced_plan f(a);
          reduce_segments(df.get(), n, pb, pe, segments, dtype::f32, op::sum, oa.get());
        }
        {
          const forced_plan f(c);
          reduce_segments(df.get(), n, pb, pe, segments, dtype::f32, op::sum, oc.get());
        }
        oa.download(ha.data(), segments * 4), oc.download(hc.data(), segments * 4);
        EXPECT_EQ(std::memcmp(ha.data(), hc.data(), segments * 4), 0)
            << "ragged " << segments << " g" << a.group << ": four in flight and " << (c.eager ? "eager" : "eight")
            << " differ (seed " << test_seed() << ")";
      }
    EXPECT_EQ(pairs, 12) << "lane groups of 1-32 at the rule's chunk: four in flight against eight and against eager";
  }
}

// Every op of the suite on segments (b, e) of an input of n elements starting `shift` elements
// past a 16-byte boundary, against the reference: the rule's plan (which must be `rule` unless
// that is null), then each ragged candidate of the sweep that `pick` selects, forced (and run as
// forced). Returns how many candidates ran for the last op.
// Small integers (n + shift + 1 of them, from `seed`) and offsets (b, e) on the GPU, the input
// starting `shift` elements past a 16-byte boundary: the problem, its host copy and ranges.
template <class T>
struct ragged_input {
  std::uint64_t segments;
  std::vector<T> x;
  device_buffer d, db, de;
  std::vector<T> xs;  // the input as the call sees it
  const void* in;
  const std::int64_t* pb;
  const std::int64_t* pe;
  std::vector<std::vector<std::uint64_t>> ranges;
  seg::problem p;
  ragged_input(const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& e, std::uint64_t n,
               std::uint64_t shift, std::uint64_t seed)
      : segments(b.size()), x(small_ints<T>(n + shift + 1, seed)), d((n + shift + 1) * sizeof(T)),
        db(segments * 8 + 8), de(segments * 8 + 8), xs(x.begin() + static_cast<std::ptrdiff_t>(shift), x.end()),
        in(static_cast<const T*>(d.get()) + shift), pb(static_cast<const std::int64_t*>(db.get())),
        pe(static_cast<const std::int64_t*>(de.get())), ranges(segment_ranges(b, e)) {
    d.upload(x.data(), x.size() * sizeof(T));
    db.upload(b.data(), segments * 8), de.upload(e.data(), segments * 8);
    p.outer = segments, p.n = n, p.d_begin = pb, p.d_end = pe;
    p.aligned16 = reinterpret_cast<std::uintptr_t>(in) % 16 == 0;
  }
};

template <class T, class Pick>
int ragged_forced_case(const char* what, const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& e,
                       std::uint64_t n, std::uint64_t shift, Pick pick, const seg::strategy* rule) {
  const std::uint64_t segments = b.size();
  const ragged_input<T> r(b, e, n, shift, test_seed() + n + segments);
  const std::vector<T>& xs = r.xs;
  const void* in = r.in;
  const std::int64_t *pb = r.pb, *pe = r.pe;
  const auto& ranges = r.ranges;
  const seg::problem& p = r.p;
  int ran = 0;
  const std::vector<unsigned char> sentinel(segments * 16 + 16, 0x7f);  // no result of the suite's ops
  for (op o : ops_for<T>()) {
    device_buffer out(segments * 16 + 16);
    reduce_segments(in, n, pb, pe, segments, dtype_of<T>(), o, out.get());
    const seg::plan chosen = seg::last_plan();
    if (rule != nullptr) {
      EXPECT_EQ(chosen.how, *rule) << what << ": " << chosen.why;
    }
    check_results((std::string(what) + " (" + chosen.why + ")").c_str(), xs, ranges, o, out);
    const int acc = o == op::argmin || o == op::argmax ? 16 : 8;
    ran = 0;
    for (seg::plan c : seg::ragged_candidates(p, sizeof(T), acc, this_gpu_limits())) {
      if (!pick(c)) continue;  // pick may adjust the candidate (a forced span batch)
      ++ran;
      out.upload(sentinel.data(), sentinel.size());  // a result the plan does not write shows
      {
        const forced_plan f(c);
        reduce_segments(in, n, pb, pe, segments, dtype_of<T>(), o, out.get());
      }
      const seg::plan got = seg::last_plan();
      EXPECT_TRUE(got.how == c.how && got.chunk == c.chunk && got.tiles == c.tiles && got.eager == c.eager &&
                  got.span == c.span && got.short_max == c.short_max && got.stripe == c.stripe)
          << what;
      if (c.how == seg::strategy::once) {
        EXPECT_NE(std::string(seg::last_kernel()).find("one-launch"), std::string::npos) << what << ": " << seg::last_kernel();
      }
      if (c.how == seg::strategy::ragged) {
        const char* want = c.eager         ? "(eager)"
                           : c.stripe > 0 ? "stripe kernel"
                           : c.tiles > 0  ? "tile kernel"
                           : c.span > 0   ? "span kernel"
                                          : "group kernel";
        EXPECT_NE(std::string(seg::last_kernel()).find(want), std::string::npos) << what << ": " << seg::last_kernel();
      }
      check_results((std::string(what) + " forced " + seg::to_string(c.how) +
                     (c.stripe > 0 ? " stripes of " + std::to_string(c.stripe) : c.tiles > 0 ? " tiles" : "") +
                     (c.span > 0 ? " span " + std::to_string(c.span) + " lane max " + std::to_string(c.short_max) : "") +
                     ", chunk " + std::to_string(c.chunk)).c_str(),
                    xs, ranges, o, out);
    }
  }
  return ran;
}

// The ragged tile kernel's edges (offsets in order; the rule's plan, then each tile candidate of
// the sweep forced): segments ending and beginning on tile boundaries, empty ones there, at 0 and at
// n, a tile of thousands of tiny segments (several windows of the block), gaps longer than many
// tiles (their tiles keep stale partition entries from the call before), long segments between
// short ones, n not a multiple of the tile, an input one element past 16-byte alignment, offsets
// out of order that would rewrite the partition many times over. Every op of the suite against
// the reference.
// With `stripes`, the stripe candidates instead (one for each stripe length the sweep makes: one
// at these sizes, where every per-warp share is a tile or less), each at its own stripe and at stripes of
// one and of three tiles (every tile boundary a stripe's; tiles inside stripes); under the
// sanitizer its own and one tile. With `once`, the one-launch candidate (the same tiles in one
// cooperative launch, the check and the fix-up in it).
enum class tiles_mode { tiles, stripes, once };
template <class T>
void ragged_tiles_case(const char* what, const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& e,
                       std::uint64_t n, std::uint64_t shift, tiles_mode mode) {
  if (mode == tiles_mode::tiles) {
    ragged_forced_case<T>(what, b, e, n, shift,
                          [](const seg::plan& c) { return c.how == seg::strategy::ragged && c.tiles > 0 && c.stripe == 0; },
                          nullptr);
    return;
  }
  if (mode == tiles_mode::once) {
    EXPECT_EQ(ragged_forced_case<T>(what, b, e, n, shift, [](const seg::plan& c) { return c.how == seg::strategy::once; },
                                    nullptr),
              1)
        << what;
    return;
  }
  const std::vector<std::uint64_t> sizes = small_only() ? std::vector<std::uint64_t>{0, 1} : std::vector<std::uint64_t>{0, 1, 3};
  for (std::uint64_t tiles : sizes) {
    const auto pick = [tiles](seg::plan& c) {
      if (c.stripe == 0) return false;
      if (tiles > 0) c.stripe = tiles * static_cast<std::uint64_t>(seg::kTileElems);
      return true;
    };
    EXPECT_GE(ragged_forced_case<T>((std::string(what) + ", stripes of " + std::to_string(tiles) + " tiles (0: the plan's)").c_str(),
                                    b, e, n, shift, pick, nullptr),
              1)
        << what;
  }
}

template <class T>
void ragged_tiles_edges(tiles_mode stripes = tiles_mode::tiles) {
  const std::int64_t W = seg::kTileElems;
  std::vector<std::int64_t> b, e;
  auto add = [&](std::int64_t lo, std::int64_t hi) { b.push_back(lo), e.push_back(hi); };
  // Boundaries: empty at 0, a segment of exactly a tile, empties on the boundary, one across it,
  // one ending on the next boundary, a short one to n = 5 tiles - 3, empties at n.
  add(0, 0), add(0, W), add(W, W), add(W, W), add(W, W + 7), add(W + 7, 2 * W - 1), add(2 * W - 1, 2 * W + 1);
  add(2 * W + 1, 3 * W), add(3 * W, 3 * W + W / 2), add(3 * W + W / 2, 5 * W - 3), add(5 * W - 3, 5 * W - 3);
  ragged_tiles_case<T>("tile boundaries", b, e, 5 * W - 3, 0, stripes);
  ragged_tiles_case<T>("tile boundaries, input not 16-byte aligned", b, e, 5 * W - 3, 1, stripes);
  // Thousands of tiny segments in one tile (lengths 0-3), then a gap of 40 tiles, a long segment
  // (60 tiles, past any chunk) and short ones after it; n a whole number of tiles.
  b.clear(), e.clear();
  std::mt19937_64 rng(test_seed() + 17);
  std::int64_t at = 5;
  while (at < W - 8) {
    const std::int64_t len = static_cast<std::int64_t>(rng() % 4);
    add(at, at + len);
    at += len;
  }
  at = 45 * W + 11;
  add(at, at + 3), add(at + 3, at + 3 + 60 * W), at += 3 + 60 * W;
  for (int k = 0; k < 50; ++k) {
    const std::int64_t len = static_cast<std::int64_t>(rng() % (W / 2));
    add(at, at + len);
    at += len;
  }
  const std::uint64_t n = static_cast<std::uint64_t>((at / W + 1) * W);
  // 40 empty segments at n, a whole number of tiles (and of the stripes' 512-element tiles):
  // more than a batch of 32 in the input's last tile.
  for (int k = 0; k < 40; ++k) add(static_cast<std::int64_t>(n), static_cast<std::int64_t>(n));
  ragged_tiles_case<T>("tiny segments, long gap, long segment, 40 empty at n", b, e, n, 0, stripes);
  // The same input with other offsets: tiles that were inside the gap now hold segments.
  for (std::size_t s = 0; s + 1 < b.size(); ++s) b[s] /= 2, e[s] = std::max(b[s], e[s] / 2);
  for (std::size_t s = 1; s < b.size(); ++s) b[s] = std::max(b[s], e[s - 1]), e[s] = std::max(e[s], b[s]);
  ragged_tiles_case<T>("the same, offsets halved (stale partition entries)", b, e, n, 0, stripes);
  // Out of order: the tile kernel runs the lane groups' body. Empty segments alternating between
  // the start and the end of the input (each such pair would write every tile's entry again: the
  // offset check's blocks stop at the partition's size) and short ones between them.
  b.clear(), e.clear();
  const std::int64_t m = 3 * W + 5;
  for (std::int64_t k = 0; k < 600; ++k) {
    if (k % 3 == 0) {
      add(0, 0);
    } else if (k % 3 == 1) {
      add(m, m);
    } else {
      add(k * 37 % m, std::min(m, k * 37 % m + 40));
    }
  }
  ragged_tiles_case<T>("out of order, the partition rewritten many times over", b, e, static_cast<std::uint64_t>(m), 0, stripes);
}

// The edges for f32, then (not under the sanitizer) f64, u8 and i64 (the stripes' branch-free fold
// with an 8-byte integer accumulator).
void ragged_tiles_edges_four_types(tiles_mode mode) {
  ragged_tiles_edges<float>(mode);
  if (small_only()) return;
  ragged_tiles_edges<double>(mode);
  ragged_tiles_edges<std::uint8_t>(mode);
  ragged_tiles_edges<std::int64_t>(mode);
}

TEST(SegmentedGpu, RaggedTilesEdges) {
  TALLY_REQUIRE_GPU();
  ragged_tiles_edges<float>();
  ragged_tiles_edges<double>();
  ragged_tiles_edges<std::uint8_t>();
}

// The one-launch kernel (once.cuh) on the tile kernel's edges: every op of the suite against the
// reference for f32, f64, u8 and i64 (offsets in order, out of order, a segment of 60 tiles that
// phase 3 joins, empties at n, stale partition entries).
TEST(SegmentedGpu, RaggedOneLaunchEdges) {
  TALLY_REQUIRE_GPU();
  ragged_tiles_edges_four_types(tiles_mode::once);
}

// The one-launch kernel's words (grid barriers, verdicts) are zero again after every call: twenty
// calls in a row give the same bits, as do three replays of a captured call; bad offsets write
// nothing (the sentinel stays), and the next call with good ones is right again.
TEST(SegmentedGpu, RaggedOneLaunchRepeatsGraphsAndBadOffsets) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t segments = small_only() ? 3000 : 20000;
  std::mt19937_64 rng(test_seed() + 91);
  std::vector<std::int64_t> b, e;
  std::int64_t at = 0;
  for (std::uint64_t s = 0; s < segments; ++s) {
    const double u = std::uniform_real_distribution<double>(1e-4, 1.0)(rng);
    const std::int64_t len = s % 7 == 0 ? 0 : static_cast<std::int64_t>(4.0 * std::pow(u, -1.0 / 1.2));  // Pareto
    b.push_back(at), e.push_back(at + len);
    at += len + (s % 11 == 3 ? 5 : 0);
  }
  const std::uint64_t n = static_cast<std::uint64_t>(at);
  const auto xf = random_vector<float>(n, test_seed() + 92, -1, 1);
  const auto xi = small_ints<float>(n, test_seed() + 93);
  device_buffer df(n * 4), di(n * 4), db(segments * 8), de(segments * 8), bad_e(segments * 8);
  df.upload(xf.data(), n * 4), di.upload(xi.data(), n * 4);
  db.upload(b.data(), segments * 8), de.upload(e.data(), segments * 8);
  std::vector<std::int64_t> e_bad = e;
  e_bad[segments / 2] = static_cast<std::int64_t>(n) + 1;  // past n
  bad_e.upload(e_bad.data(), segments * 8);
  const auto* pb = static_cast<const std::int64_t*>(db.get());
  const auto* pe = static_cast<const std::int64_t*>(de.get());
  const seg::plan once = last_ragged_candidate(pb, pe, segments, n, seg::strategy::once);
  ASSERT_EQ(once.how, seg::strategy::once);
  const forced_plan f(once);
  device_buffer first(segments * 4), again(segments * 4), graphed(segments * 4);
  reduce_segments(df.get(), n, pb, pe, segments, dtype::f32, op::sum, first.get());
  ASSERT_EQ(seg::last_plan().how, seg::strategy::once);
  std::vector<float> h1(segments), h2(segments);
  first.download(h1.data(), segments * 4);
  for (int k = 0; k < 20; ++k) {
    reduce_segments(df.get(), n, pb, pe, segments, dtype::f32, op::sum, again.get());
    again.download(h2.data(), segments * 4);
    ASSERT_EQ(std::memcmp(h1.data(), h2.data(), segments * 4), 0) << "call " << k << " (seed " << test_seed() << ")";
  }
  {
    captured_call cap([&](stream_t st) {
      reduce_segments(df.get(), n, pb, pe, segments, dtype::f32, op::sum, graphed.get(), st);
    });
    ASSERT_TRUE(cap.ok);
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(cudaMemset(graphed.get(), 0, segments * 4), cudaSuccess);
      ASSERT_TRUE(cap.replay());
      graphed.download(h2.data(), segments * 4);
      EXPECT_EQ(std::memcmp(h1.data(), h2.data(), segments * 4), 0) << "replay " << k;
    }
  }
  // Bad offsets: nothing written; then good ones: right again (small integers: exact sums).
  const std::vector<float> sentinel(segments, -7.0f);
  device_buffer out(segments * 16);
  out.upload(sentinel.data(), segments * 4);
  reduce_segments(di.get(), n, pb, static_cast<const std::int64_t*>(bad_e.get()), segments, dtype::f32, op::sum, out.get());
  std::vector<float> h3(segments);
  out.download(h3.data(), segments * 4);
  EXPECT_EQ(std::memcmp(h3.data(), sentinel.data(), segments * 4), 0) << "bad offsets wrote results";
  for (op o : {op::sum, op::max, op::argmin}) {
    reduce_segments(di.get(), n, pb, pe, segments, dtype::f32, o, out.get());
    check_results("one launch after bad offsets", xi, segment_ranges(b, e), o, out);
  }
  // And the first call's bits again.
  reduce_segments(df.get(), n, pb, pe, segments, dtype::f32, op::sum, again.get());
  again.download(h2.data(), segments * 4);
  EXPECT_EQ(std::memcmp(h1.data(), h2.data(), segments * 4), 0);
  // Offsets out of order (the same segments listed last to first: a warp a segment, another
  // association), right; then in order again: the first call's bits (the verdict was reset).
  std::vector<std::int64_t> rb(b.rbegin(), b.rend()), re(e.rbegin(), e.rend());
  device_buffer rdb(segments * 8), rde(segments * 8);
  rdb.upload(rb.data(), segments * 8), rde.upload(re.data(), segments * 8);
  reduce_segments(di.get(), n, static_cast<const std::int64_t*>(rdb.get()), static_cast<const std::int64_t*>(rde.get()),
                  segments, dtype::f32, op::sum, out.get());
  check_results("one launch, offsets out of order", xi, segment_ranges(rb, re), op::sum, out);
  reduce_segments(df.get(), n, pb, pe, segments, dtype::f32, op::sum, again.get());
  again.download(h2.data(), segments * 4);
  EXPECT_EQ(std::memcmp(h1.data(), h2.data(), segments * 4), 0) << "after offsets out of order";
}

// More tiles than the one-launch grid (a block takes several tiles; its entries in batches) and
// than its warps (phase 3's warps take several tiles): 2^25 u8 elements, 8192 tiles, Pareto lengths
// up to about 40000 elements and empty ones, every op of the suite against the reference (the
// rule's plan, then the once candidate). Not under the sanitizer (its size).
TEST(SegmentedGpu, RaggedOneLaunchManyTiles) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "2^25 elements: not at the sanitizer's sizes";
  const std::uint64_t n = std::uint64_t(1) << 25;
  std::mt19937_64 rng(test_seed() + 97);
  std::vector<std::int64_t> b, e;
  std::int64_t at = 0;
  const auto in = static_cast<std::int64_t>(n);
  while (at < in) {
    const double u = std::uniform_real_distribution<double>(1e-4, 1.0)(rng);
    const std::int64_t len = b.size() % 5 == 0 ? 0 : std::min(in - at, static_cast<std::int64_t>(16.0 * std::pow(u, -1.0 / 1.2)));
    b.push_back(at), e.push_back(at + len);
    at += len;
  }
  EXPECT_EQ(ragged_forced_case<std::uint8_t>("one launch, 8192 tiles", b, e, n, 0,
                                             [](const seg::plan& c) { return c.how == seg::strategy::once; }, nullptr),
            1);
}

// Begin and end offsets of `count` segments in order: before segment s a gap of gap(s, rng)
// elements, then len(s, rng) elements (gap first, then len, for each s in turn; rng seeded with
// `seed`).
template <class Gap, class Len>
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> in_order_offsets(std::uint64_t count, std::uint64_t seed,
                                                                                 Gap gap, Len len) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> b, e;
  std::int64_t at = 0;
  for (std::uint64_t s = 0; s < count; ++s) {
    at += gap(s, rng);
    const std::int64_t l = len(s, rng);
    b.push_back(at), e.push_back(at + l);
    at += l;
  }
  return {b, e};
}

// Eager lane groups (range_share_eager; every lane-group width the sweep offers, forced, and the
// eager kernel seen to run): segments of 0-300 elements (0-200 under the sanitizer) starting
// anywhere (heads and tails of 0-3 elements, last rounds of 0-3 vectors a lane), middle ones of
// 1000-2000 that a warp reads where the groups are narrower, and long ones past the chunk; the
// input at and one element past a 16-byte boundary. Every op of the suite against the reference, for 4- and
// 8-byte elements (smaller ones have no eager candidates).
template <class T>
void eager_lane_groups() {
  const bool small = small_only();  // under the sanitizer: about 2^16 elements
  const std::uint64_t short_span = small ? 201 : 301;
  const auto [b, e] = in_order_offsets(
      small ? 300 : 3000, test_seed() + 23,
      [](std::uint64_t k, std::mt19937_64& rng) {
        return (k == 0) + (k % 11 == 3 ? static_cast<std::int64_t>(rng() % 5) : 0);  // a gap
      },
      [&](std::uint64_t k, std::mt19937_64& rng) {
        std::int64_t len = static_cast<std::int64_t>(rng() % short_span);
        if (k % 97 == 5) len = 1000 + static_cast<std::int64_t>(rng() % 1000);  // a warp's, past narrow groups
        if (k % 499 == 7) len = small ? 20000 : 70000;                           // past any chunk
        return len;
      });
  const std::int64_t at = e.back();
  const auto eager = [](const seg::plan& c) { return c.eager; };
  for (std::uint64_t shift : {std::uint64_t(0), std::uint64_t(1)}) {
    const int ran = ragged_forced_case<T>(shift ? "eager lane groups, input not 16-byte aligned" : "eager lane groups", b,
                                          e, static_cast<std::uint64_t>(at), shift, eager, nullptr);
    EXPECT_EQ(ran, 6) << "eager candidates (lane groups of 1-32) for " << sizeof(T) << "-byte elements";
  }
}
TEST(SegmentedGpu, EagerLaneGroupsEveryOp) {
  TALLY_REQUIRE_GPU();
  eager_lane_groups<float>();
  eager_lane_groups<double>();
  eager_lane_groups<std::int32_t>();
}

// Ragged spans (every window and lane limit the sweep offers, forced, and the span kernel seen to
// run): batches of 32 segments with lengths of 0-40, at and around each lane limit (128-513 f32),
// middle ones a warp reads (1000-5000) and long ones past the chunk, gaps of 1-16 elements (copied
// in one run) and of 17-200 (a new run), a segment count not a multiple of 32, the input at and
// one element past a 16-byte boundary, and offsets out of order (the lane groups' body then).
// Every op of the suite against the reference, for 1-, 4- and 8-byte elements.
template <class T>
void ragged_spans() {
  const bool small = small_only();
  auto [b, e] = in_order_offsets(
      (small ? 400 : 2500) + 7, test_seed() + 29,
      [](std::uint64_t k, std::mt19937_64& rng) {
        std::int64_t gap = k == 0 ? 3 : 0;
        if (k % 11 == 3) gap += 1 + static_cast<std::int64_t>(rng() % 16);    // a gap inside a run
        if (k % 37 == 6) gap += 17 + static_cast<std::int64_t>(rng() % 184);  // a new run
        return gap;
      },
      [small](std::uint64_t k, std::mt19937_64& rng) {
        constexpr std::int64_t limits[] = {127, 128, 129, 255, 256, 257, 511, 512, 513};
        std::int64_t len = static_cast<std::int64_t>(rng() % 41);
        if (k % 7 == 2) len = limits[rng() % 9];
        if (k % 89 == 5) len = 1000 + static_cast<std::int64_t>(rng() % 4000);  // a warp's
        if (k % 601 == 9) len = small ? 20000 : 70000;                            // past any chunk
        return len;
      });
  const std::int64_t at = e.back();
  const auto span = [](const seg::plan& c) { return c.span > 0; };
  for (std::uint64_t shift : {std::uint64_t(0), std::uint64_t(1)}) {
    const int ran = ragged_forced_case<T>(shift ? "ragged spans, input not 16-byte aligned" : "ragged spans", b, e,
                                          static_cast<std::uint64_t>(at), shift, span, nullptr);
    EXPECT_EQ(ran, 13) << "span candidates (windows of 4-16 KiB, lane limits of 1-4 KiB; four folding middle segments)";
  }
  // These segments are few: four a warp. The rule's 32 a warp (runs across every lane, lane 31's
  // ends), and 8 and 1, forced (span_segs is the warp's batch alone: any 1-32 fits any problem).
  for (int per : {32, 8, 1}) {
    const auto batch = [per](seg::plan& c) {
      if (c.span == 0) return false;
      c.span_segs = per;
      return true;
    };
    EXPECT_EQ(ragged_forced_case<T>(("ragged spans, " + std::to_string(per) + " segments a warp").c_str(), b, e,
                                    static_cast<std::uint64_t>(at), 1, batch, nullptr),
              13);
  }
  // Out of order (the first 64 segments reversed): the span kernel runs the lane groups' body.
  std::reverse(b.begin(), b.begin() + 64), std::reverse(e.begin(), e.begin() + 64);
  EXPECT_EQ(ragged_forced_case<T>("ragged spans, offsets out of order", b, e, static_cast<std::uint64_t>(at), 0, span,
                                  nullptr),
            13);
}
TEST(SegmentedGpu, RaggedSpansEveryOp) {
  TALLY_REQUIRE_GPU();
  ragged_spans<float>();
  ragged_spans<double>();
  ragged_spans<std::uint8_t>();
  ragged_spans<std::int64_t>();
}

// Random f32 in ragged segments (b, e) on the GPU, at `shift` elements past a 16-byte boundary:
// the sweep's candidates for them, and the f32 sums of a forced plan.
struct f32_segments {
  std::uint64_t segments, n;
  device_buffer d, db, de;
  f32_segments(const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& e, std::uint64_t seed)
      : segments(b.size()), n(static_cast<std::uint64_t>(e.empty() ? 0 : e.back())), d((n + 1) * 4),
        db(segments * 8), de(segments * 8) {
    const auto x = random_vector<float>(n + 1, seed, -1, 1);
    d.upload(x.data(), (n + 1) * 4);
    db.upload(b.data(), segments * 8), de.upload(e.data(), segments * 8);
  }
  const std::int64_t* begin() const { return static_cast<const std::int64_t*>(db.get()); }
  const std::int64_t* end() const { return static_cast<const std::int64_t*>(de.get()); }
  std::vector<seg::plan> candidates(std::uint64_t shift) const {
    seg::problem p;
    p.outer = segments, p.n = n, p.d_begin = begin(), p.d_end = end();
    p.aligned16 = shift == 0;
    return seg::ragged_candidates(p, 4, 4, this_gpu_limits());
  }
  std::vector<float> sums(const seg::plan& c, std::uint64_t shift) const {
    std::vector<float> h(segments, std::numeric_limits<float>::quiet_NaN());
    device_buffer out(segments * 4);
    out.upload(h.data(), segments * 4);  // a result left unwritten reads NaN
    const forced_plan f(c);
    reduce_segments(static_cast<const float*>(d.get()) + shift, n, begin(), end(), segments, dtype::f32, op::sum,
                    out.get());
    out.download(h.data(), segments * 4);
    return h;
  }
};

// A lane folds its segment from the window in range_share's order with one lane: on segments of
// 0-128 f32 (none past the one-lane group's limit), random floats, every span candidate gives
// the bits of one lane a segment at the same chunk, at and one element past a 16-byte boundary,
// with gaps inside runs and between them.
TEST(SegmentedGpu, SpansMatchOneLaneBitwise) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t segments = small_only() ? 700 : 20000;
  const auto [b, e] = in_order_offsets(
      segments, test_seed() + 31,
      [](std::uint64_t s, std::mt19937_64& rng) { return s % 17 == 4 ? static_cast<std::int64_t>(rng() % 40) : 0; },
      [](std::uint64_t, std::mt19937_64& rng) { return static_cast<std::int64_t>(rng() % 129); });
  const f32_segments data(b, e, test_seed() + 37);
  for (std::uint64_t shift : {std::uint64_t(0), std::uint64_t(1)}) {
    const auto cands = data.candidates(shift);
    const seg::plan* one = nullptr;
    for (const seg::plan& c : cands)
      if (c.tiles == 0 && c.span == 0 && !c.eager && c.group == 1 && c.unroll == 4) one = &c;
    ASSERT_NE(one, nullptr);
    ASSERT_GE(one->short_max, 128u);
    const auto want = data.sums(*one, shift);
    int pairs = 0;
    for (const seg::plan& c : cands) {
      if (c.span == 0 || c.chunk != one->chunk) continue;
      ++pairs;
      EXPECT_EQ(std::memcmp(data.sums(c, shift).data(), want.data(), segments * 4), 0)
          << "span " << c.span << " lane max " << c.short_max << " shift " << shift << " (seed " << test_seed() << ")";
    }
    EXPECT_EQ(pairs, 13);
  }
}

// The warp folding its middle segments from the windows (`m` candidates) gives the bits of the
// warp reading them itself: Pareto lengths up to ~17000 f32 (middle ones between the lane limit
// and the chunk, long ones past it), random floats, gaps, at and one element past a 16-byte
// boundary; each `m` candidate against the span plan of its window and lane limit.
TEST(SegmentedGpu, SpanMiddleSegmentsMatchTheWarp) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t segments = 3000;  // under the sanitizers too: 300 held too few middle ones
  const auto [b, e] = in_order_offsets(
      segments, test_seed() + 41,
      [](std::uint64_t s, std::mt19937_64& rng) { return s % 13 == 4 ? static_cast<std::int64_t>(rng() % 30) : 0; },
      [](std::uint64_t s, std::mt19937_64& rng) {
        const double u = std::uniform_real_distribution<double>(1e-4, 1.0)(rng);
        return s % 5 == 0 ? std::int64_t(0) : static_cast<std::int64_t>(8.0 * std::pow(u, -1.0 / 1.2));
      });
  const f32_segments data(b, e, test_seed() + 43);
  for (std::uint64_t shift : {std::uint64_t(0), std::uint64_t(1)}) {
    const auto cands = data.candidates(shift);
    int pairs = 0, middle = 0;
    for (const seg::plan& m : cands) {
      if (!m.span_mid) continue;
      for (std::uint64_t s = 0; s < segments; ++s) {
        const auto len = static_cast<std::uint64_t>(e[s] - b[s]);
        middle += len > m.short_max && len <= m.chunk;
      }
      for (const seg::plan& c : cands) {
        if (c.span_mid || c.span != m.span || c.short_max != m.short_max || c.chunk != m.chunk) continue;
        ++pairs;
        EXPECT_EQ(std::memcmp(data.sums(m, shift).data(), data.sums(c, shift).data(), segments * 4), 0)
            << "span " << m.span << " lane max " << m.short_max << " shift " << shift << " (seed " << test_seed() << ")";
      }
    }
    EXPECT_EQ(pairs, 4);
    EXPECT_GT(middle, 20) << "middle segments in the data";
  }
}

// Ragged stripes (the stripe kernel: a warp a stripe of the input, runs carried across lanes,
// tiles and stripes). The tile kernel's edges for f32, f64 and u8 (ragged_tiles_edges: segments
// on tile boundaries, which the one-tile stripes make stripe boundaries, empties at 0, there and
// at n, thousands of tiny segments in a tile, a gap of 40 tiles, a segment across 60 tiles, an
// input one element past 16-byte alignment, offsets out of order); then Pareto lengths with a
// fifth empty, gaps and segments of 70000 across many stripes, every op against the reference
// (ragged_tiles_case); random f32: the same bits twice, and each sum within the rounding bound of
// any order of the exact sum.
TEST(SegmentedGpu, RaggedStripesEdges) {
  TALLY_REQUIRE_GPU();
  ragged_tiles_edges_four_types(tiles_mode::stripes);
}

TEST(SegmentedGpu, RaggedStripesParetoLengths) {
  TALLY_REQUIRE_GPU();
  const bool small = small_only();
  const std::uint64_t segments = small ? 800 : 6000;
  const auto [b, e] = in_order_offsets(
      segments, test_seed() + 51,
      [](std::uint64_t s, std::mt19937_64& rng) {
        if (s % 37 == 6) return static_cast<std::int64_t>(17 + rng() % 300);
        return s % 11 == 3 ? static_cast<std::int64_t>(rng() % 12) : std::int64_t(0);
      },
      [small](std::uint64_t s, std::mt19937_64& rng) {
        if (s % 5 == 0) return std::int64_t(0);
        if (s % 401 == 7) return std::int64_t(small ? 20000 : 70000);  // across several stripes
        const double u = std::uniform_real_distribution<double>(1e-4, 1.0)(rng);
        return static_cast<std::int64_t>(8.0 * std::pow(u, -1.0 / 1.2));
      });
  const std::uint64_t n = static_cast<std::uint64_t>(e.back());
  for (std::uint64_t shift : {std::uint64_t(0), std::uint64_t(1)}) {
    ragged_tiles_case<float>("stripes, Pareto lengths", b, e, n, shift, tiles_mode::stripes);
    if (!small) ragged_tiles_case<std::int32_t>("stripes, Pareto lengths", b, e, n, shift, tiles_mode::stripes);
  }
  // Random f32: the same bits twice; each sum within (len - 1) x 2^-24 x sum |x| of the exact one
  // (a bound for any order of additions).
  const f32_segments data(b, e, test_seed() + 53);
  const auto x = random_vector<float>(data.n + 1, test_seed() + 53, -1, 1);
  for (std::uint64_t shift : {std::uint64_t(0), std::uint64_t(1)}) {
    int stripes = 0;
    for (const seg::plan& c : data.candidates(shift)) {
      if (c.stripe == 0) continue;
      ++stripes;
      const auto got = data.sums(c, shift), again = data.sums(c, shift);
      EXPECT_EQ(std::memcmp(got.data(), again.data(), segments * 4), 0) << "stripe " << c.stripe << " shift " << shift;
      for (std::uint64_t s = 0; s < segments; ++s) {
        double exact = 0, mag = 0;
        for (std::int64_t i = b[s]; i < e[s]; ++i) {
          exact += static_cast<double>(x[static_cast<std::size_t>(i) + shift]);
          mag += std::fabs(static_cast<double>(x[static_cast<std::size_t>(i) + shift]));
        }
        const double len = static_cast<double>(e[s] - b[s]);
        const double bound = (len > 1 ? len - 1 : 0) * std::ldexp(1.0, -24) * mag * 1.01 + 1e-30;
        ASSERT_LE(std::fabs(static_cast<double>(got[s]) - exact), bound)
            << "segment " << s << " of " << len << ", stripe " << c.stripe << " shift " << shift << " (seed " << test_seed() << ")";
      }
    }
    EXPECT_GE(stripes, 1);  // one for each stripe length of the sweep
  }
}

// The lean split kernel (plain ops, a 256-thread block a row of whole aligned vectors, eight
// blocks an SM) gives the bits of the split kernel it replaces. Rows of one round of 256 x 4
// vectors, of 1300 (a partial round that ends inside a warp) and of 1536, 300 of them, with a
// row stride past the row; the same plan forced onto a grid of 7 blocks (each block several rows
// in turn). Data whose results depend on the order or on every element: float sums and means of
// random values, float products of values near 1, integer sums, min and max over the type's
// whole range; f32 / f64 / i32 / u8 / i64. Kinds whose lean kernel spills here
// (seg::lean_available) keep the split kernel: the rule must not take the lean one for
// them. An argmax forced onto it is refused before anything is written.
template <class T>
int lean_split_same_bits(std::initializer_list<op> ops, double lo, double hi) {
  constexpr std::uint64_t vn = 16 / sizeof(T);
  int compared = 0;
  for (const std::uint64_t vecs : {std::uint64_t(1024), std::uint64_t(1300), std::uint64_t(1536)}) {
    const std::uint64_t rows = 300, cols = vecs * vn, ld = cols + vn;
    const auto x = random_vector<T>(rows * ld, test_seed() + vecs, lo, hi);
    device_buffer d(x.size() * sizeof(T)), lean(rows * 16), held(rows * 16), few(rows * 16);
    d.upload(x.data(), x.size() * sizeof(T));
    for (op o : ops) {
      const std::string what = std::string(to_string(dtype_of<T>())) + " " + to_string(o) + ", rows of " +
                               std::to_string(cols) + " (seed " + std::to_string(test_seed()) + ")";
      const bool available = seg::lean_available(dtype_of<T>(), core::kind_for(dtype_of<T>(), o, options{}),
                                                 seg::lean_kernel::split, core::current_context());
      reduce_rows(d.get(), rows, cols, ld, dtype_of<T>(), o, lean.get());
      const seg::plan rule = seg::last_plan();
      if (rule.how != seg::strategy::split) {
        ADD_FAILURE() << what << ": the rule took " << seg::to_string(rule.how) << ", not a block a row";
        continue;
      }
      EXPECT_EQ(rule.split_lean, available) << what << ": " << rule.why;
      if (!rule.split_lean) continue;
      EXPECT_EQ(rule.split_block, seg::kSplitBlockSmall) << what;
      seg::plan other = rule, seven = rule;
      other.split_lean = false;
      seven.blocks = 7;
      {
        const forced_plan f(other);
        reduce_rows(d.get(), rows, cols, ld, dtype_of<T>(), o, held.get());
      }
      EXPECT_FALSE(seg::last_plan().split_lean) << what;
      {
        const forced_plan f(seven);
        reduce_rows(d.get(), rows, cols, ld, dtype_of<T>(), o, few.get());
      }
      EXPECT_EQ(seg::last_plan().blocks, 7u) << what;
      const std::size_t bytes = rows * dtype_size(result_dtype(dtype_of<T>(), o));
      std::vector<unsigned char> a(bytes), b(bytes), c(bytes);
      lean.download(a.data(), bytes);
      held.download(b.data(), bytes);
      few.download(c.data(), bytes);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << what << ": lean and split kernels differ";
      EXPECT_EQ(std::memcmp(a.data(), c.data(), bytes), 0) << what << ": 7 blocks differ from one a row";
      ++compared;
    }
  }
  return compared;
}
TEST(SegmentedGpu, LeanSplitKernelKeepsTheBits) {
  TALLY_REQUIRE_GPU();
  int compared = lean_split_same_bits<float>({op::sum, op::mean, op::min, op::max}, -2, 2);
  compared += lean_split_same_bits<float>({op::prod}, 0.9, 1.1);
  compared += lean_split_same_bits<double>({op::sum, op::mean, op::max}, -2, 2);
  compared += lean_split_same_bits<double>({op::prod}, 0.9, 1.1);
  const double wide = 1e300;  // random_vector clamps to each integer type's range
  compared += lean_split_same_bits<std::int32_t>({op::sum, op::min, op::max}, -wide, wide);
  compared += lean_split_same_bits<std::uint8_t>({op::sum, op::min, op::max}, 0, wide);
  compared += lean_split_same_bits<std::int64_t>({op::sum, op::max}, -wide, wide);
  EXPECT_GT(compared, 0) << "no kind took the lean split kernel on this GPU";
  // An op outside the plain family: the split kernel, and the lean one refused when forced.
  const std::uint64_t rows = 64, cols = 4096;
  const auto x = random_vector<float>(rows * cols, test_seed(), -1, 1);
  device_buffer d(x.size() * 4), out(rows * 16);
  d.upload(x.data(), x.size() * 4);
  reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::argmax, out.get());
  seg::plan rule = seg::last_plan();
  ASSERT_EQ(rule.how, seg::strategy::split);
  EXPECT_FALSE(rule.split_lean) << rule.why;
  rule.split_lean = true;
  std::vector<unsigned char> before(rows * 16), after(rows * 16);
  out.download(before.data(), before.size());
  {
    const forced_plan f(rule);
    EXPECT_THROW(reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::argmax, out.get()), error);
  }
  out.download(after.data(), after.size());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0);
}

// The lean columns kernel (plain ops, 16-byte loads, four blocks an SM) gives the bits of the
// columns kernel's plan it replaces: tiles a block each and tiles shared by many blocks (2048 x 32
// vectors, 2^14 x 4), a row stride past the row and a partial last round (517 x 64 vectors, ld 66),
// a tile wider than the results (300 x 10 vectors: lanes past the last column), an axis of a 3-D
// array (3 x 500 x 16 vectors: tiles of several outer slices); the columns kernel's plan also on
// a grid of 7 blocks (each block several tiles and shares in turn), the lean one refused there (a
// block a share). Data whose results depend on the order
// or on every element, as for the lean split kernel; f32 / f64 / i32 / u8 / i64 / f16. Kinds
// whose lean kernel spills here (seg::lean_available) keep the columns kernel. Then every lean
// candidate of the f32 sum's sweep against its twin, and an argmax forced onto the lean kernel
// refused before anything is written.
template <class T, dtype DT = dtype_of<T>()>
int lean_columns_same_bits(std::initializer_list<op> ops, double lo, double hi) {
  constexpr std::uint64_t vn = 16 / sizeof(T);
  struct shape {
    std::uint64_t outer, rows, cols, ld;
  };
  int compared = 0;
  for (const shape sh : {shape{1, 2048, 32 * vn, 32 * vn}, shape{1, 1u << 14, 4 * vn, 4 * vn},
                         shape{1, 517, 64 * vn, 66 * vn}, shape{1, 300, 10 * vn, 11 * vn}, shape{3, 500, 16 * vn, 16 * vn}}) {
    const std::uint64_t n = sh.outer * sh.rows * sh.ld, results = sh.outer * sh.cols;
    auto x = random_vector<T>(n, test_seed() + sh.rows + sh.cols, lo, hi);
    if constexpr (DT == dtype::f16 || DT == dtype::bf16)  // the exponent's top bit clear: magnitudes under 2, all finite
      for (T& v : x) v = static_cast<T>(v & 0xBFFFu);
    device_buffer d(x.size() * sizeof(T)), lean(results * 16), held(results * 16), few(results * 16);
    d.upload(x.data(), x.size() * sizeof(T));
    const std::uint64_t dims[3] = {sh.outer, sh.rows, sh.cols};
    for (op o : ops) {
      const std::string what = std::string(to_string(DT)) + " " + to_string(o) + ", " +
                               std::to_string(sh.outer) + " x " + std::to_string(sh.rows) + " x " + std::to_string(sh.cols) +
                               " ld " + std::to_string(sh.ld) + " (seed " + std::to_string(test_seed()) + ")";
      const auto call = [&](void* out) {
        if (sh.outer == 1) reduce_columns(d.get(), sh.rows, sh.cols, sh.ld, DT, o, out);
        else reduce_axis(d.get(), dims, 3, 1, 1, DT, o, out);
      };
      const bool available = seg::lean_available(DT, core::kind_for(DT, o, options{}),
                                                 seg::lean_kernel::columns, core::current_context());
      call(lean.get());
      const seg::plan rule = seg::last_plan();
      if (rule.how != seg::strategy::columns) {
        ADD_FAILURE() << what << ": the rule took " << seg::to_string(rule.how) << ", not column tiles";
        continue;
      }
      EXPECT_EQ(rule.col_lean, available) << what << ": " << rule.why;
      if (!rule.col_lean) continue;
      EXPECT_FALSE(rule.col_ring) << what;
      seg::plan other = rule, seven = rule, few_grid = rule;
      other.col_lean = false;
      seven.col_lean = false;
      seven.blocks = 7;  // the columns kernel loops over the tiles' shares
      few_grid.blocks = 7;  // the lean one takes a block a share: refused
      {
        const forced_plan f(other);
        call(held.get());
      }
      EXPECT_FALSE(seg::last_plan().col_lean) << what;
      {
        const forced_plan f(seven);
        call(few.get());
      }
      EXPECT_EQ(seg::last_plan().blocks, 7u) << what;
      const std::size_t bytes = results * dtype_size(result_dtype(DT, o));
      std::vector<unsigned char> a(bytes), b(bytes), c(bytes), after(bytes);
      lean.download(a.data(), bytes);
      held.download(b.data(), bytes);
      few.download(c.data(), bytes);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << what << ": lean and columns kernels differ";
      EXPECT_EQ(std::memcmp(a.data(), c.data(), bytes), 0) << what << ": 7 blocks of the columns kernel differ";
      {
        const forced_plan f(few_grid);
        EXPECT_THROW(call(lean.get()), error) << what;
      }
      lean.download(after.data(), bytes);
      EXPECT_EQ(std::memcmp(a.data(), after.data(), bytes), 0) << what << ": a refused plan wrote";
      ++compared;
    }
  }
  return compared;
}
TEST(SegmentedGpu, LeanColumnKernelKeepsTheBits) {
  TALLY_REQUIRE_GPU();
  int compared = lean_columns_same_bits<float>({op::sum, op::mean, op::min, op::max}, -2, 2);
  compared += lean_columns_same_bits<float>({op::prod}, 0.99, 1.01);
  compared += lean_columns_same_bits<double>({op::sum, op::mean, op::max}, -2, 2);
  const double wide = 1e300;  // random_vector clamps to each integer type's range
  compared += lean_columns_same_bits<std::int32_t>({op::sum, op::min, op::max}, -wide, wide);
  compared += lean_columns_same_bits<std::uint8_t>({op::sum, op::max}, 0, wide);
  compared += lean_columns_same_bits<std::int64_t>({op::sum, op::min}, -wide, wide);
  compared += lean_columns_same_bits<std::uint16_t, dtype::f16>({op::sum, op::mean, op::max}, 0, 65535);
  compared += lean_columns_same_bits<std::uint16_t, dtype::bf16>({op::sum, op::min}, 0, 65535);
  compared += lean_columns_same_bits<std::int16_t>({op::sum, op::max}, -wide, wide);
  EXPECT_GT(compared, 0) << "no kind took the lean columns kernel on this GPU";
  // On sm_90 (nvcc 13.0, ptxas -v) these fit 64 registers with no local memory: the rule must take
  // the lean kernel for them there (1-byte elements, 2-byte integers' sums and 4-byte integer sums
  // keep the columns kernel: docs/tuning.md, "Columns: a lean tile kernel at four blocks an SM" and
  // "Columns: the combine's quotients as shifts").
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  if (major == 9) {
    for (const auto& [t, k] : {std::pair{dtype::f32, core::kind::sum}, {dtype::f32, core::kind::max},
                               {dtype::f32, core::kind::mean}, {dtype::f64, core::kind::sum},
                               {dtype::i64, core::kind::sum}, {dtype::i32, core::kind::max},
                               {dtype::f16, core::kind::sum}, {dtype::bf16, core::kind::sum},
                               {dtype::f16, core::kind::max}, {dtype::i16, core::kind::max}})
      EXPECT_TRUE(seg::lean_available(t, k, seg::lean_kernel::columns, core::current_context()))
          << to_string(t) << " kind " << static_cast<int>(k);
  }
  // Every lean candidate of the f32 sum's sweep against its one-round twin (just before it).
  const std::uint64_t rows = 2048, cols = 256;
  const auto x = random_vector<float>(rows * cols, test_seed() + 11, -1, 1);
  device_buffer d(x.size() * 4);
  d.upload(x.data(), x.size() * 4);
  seg::problem p;
  p.outer = 1, p.length = rows, p.inner = cols, p.length_stride = cols;
  p.aligned16 = reinterpret_cast<std::uintptr_t>(d.get()) % 16 == 0;
  seg::device_limits lim = this_gpu_limits();
  lim.columns_lean = seg::lean_available(dtype::f32, core::kind::sum, seg::lean_kernel::columns, core::current_context());
  const auto run = [&](const seg::plan& c) {
    std::vector<float> h(cols);
    device_buffer out(cols * 4);
    {
      const forced_plan f(c);
      reduce_columns(d.get(), rows, cols, cols, dtype::f32, op::sum, out.get());
    }
    out.download(h.data(), cols * 4);
    return h;
  };
  const auto cands = seg::column_candidates(p, 4, 4, lim);
  int twins = 0;
  for (std::size_t i = 1; i < cands.size(); ++i) {
    if (!cands[i].col_lean) continue;
    ++twins;
    const auto a = run(cands[i]), b = run(cands[i - 1]);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), cols * 4), 0)
        << "c" << cands[i].col_vecs << " x" << cands[i].per_seg << " (seed " << test_seed() << ")";
  }
  EXPECT_EQ(twins > 0, lim.columns_lean);
  // An op outside the plain family: the columns kernel, and the lean one refused when forced.
  device_buffer out(cols * 16);
  reduce_columns(d.get(), rows, cols, cols, dtype::f32, op::argmax, out.get());
  seg::plan rule = seg::last_plan();
  ASSERT_EQ(rule.how, seg::strategy::columns);
  EXPECT_FALSE(rule.col_lean) << rule.why;
  rule.col_lean = true;
  rule.col_ring = false;
  std::vector<unsigned char> before(cols * 16), after(cols * 16);
  out.download(before.data(), before.size());
  {
    const forced_plan f(rule);
    EXPECT_THROW(reduce_columns(d.get(), rows, cols, cols, dtype::f32, op::argmax, out.get()), error);
  }
  out.download(after.data(), after.size());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0);
}

// A ragged plan forced onto a call it was not made for (a longer input: more tiles, more chunks)
// is refused before any launch, never run with a partition of the wrong size.
TEST(SegmentedGpu, ForcedRaggedPlanOfAnotherInputIsRefused) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = 100000, longer = n + 3 * static_cast<std::uint64_t>(seg::kTileElems), segments = 3;
  const std::vector<std::int64_t> b{0, 10, 60000}, e{10, 60000, static_cast<std::int64_t>(longer)};
  device_buffer d(longer * 4), db(segments * 8), de(segments * 8), out(segments * 16);
  db.upload(b.data(), segments * 8), de.upload(e.data(), segments * 8);
  const auto* pb = static_cast<const std::int64_t*>(db.get());
  const auto* pe = static_cast<const std::int64_t*>(de.get());
  seg::problem p;
  p.outer = segments, p.n = n, p.d_begin = pb, p.d_end = pe;
  const auto made = seg::ragged_candidates(p, 4, 4, this_gpu_limits());
  ASSERT_FALSE(made.empty());
  ASSERT_GT(made[0].tiles, 0u);
  const forced_plan f(made[0]);
  EXPECT_THROW(reduce_segments(d.get(), longer, pb, pe, segments, dtype::f32, op::sum, out.get()), error);
}

// Few ragged segments (the pieces plan: one launch, every block reads all the offsets). For the
// rule's piece size (8 KiB at these sizes) and every forced candidate (4 KiB to 256 KiB; at 16
// KiB the f32 and i32 pieces cut at the boundaries below): segments of exactly one piece, one more and one
// less, several pieces, empty ones (at 0, between, at n), a segment of the whole input
// overlapping the others, one out of order, begins off 16-byte alignment; 300 segments over the
// same elements (more pieces than the workspace's partials at the plan's size); kPiecesMaxSegments
// segments (the last thread's count); every op of the suite against the reference (small
// integers: ties across pieces for argmin/argmax); float sums bitwise the same twice and in a
// captured graph; a forced pieces plan for more segments than it may take is refused.
template <class T>
void ragged_pieces_case(const char* what, const std::vector<std::int64_t>& b, const std::vector<std::int64_t>& e,
                        std::uint64_t n) {
  static constexpr seg::strategy kPieces = seg::strategy::pieces;
  const int ran = ragged_forced_case<T>(what, b, e, n, 0, [](const seg::plan& c) { return c.how == kPieces; }, &kPieces);
  EXPECT_GE(ran, 3) << what;
}

TEST(SegmentedGpu, RaggedPiecesEdges) {
  TALLY_REQUIRE_GPU();
  seg::problem q;
  static const std::int64_t fake = 0;
  q.outer = 7, q.n = 1u << 20, q.d_begin = q.d_end = &fake;
  const seg::plan pl = seg::make_plan(q, 4, 4, false, this_gpu_limits());
  ASSERT_EQ(pl.how, seg::strategy::pieces) << pl.why;
  const std::int64_t c = static_cast<std::int64_t>(pl.chunk);
  // Piece boundaries: exactly a piece, one more, one less, three pieces and a bit from an odd
  // begin, empties at 0, between and at n, the whole input (overlapping), one out of order (the last).
  const std::int64_t n = 9 * c + 5;
  std::vector<std::int64_t> b{0, 0, c, 2 * c + 1, 3 * c, 3 * c + 3, 7 * c, 0, n, 8 * c},
      e{0, c, 2 * c + 1, 3 * c, 3 * c, 6 * c + 7, 7 * c, n, n, 8 * c + 9};
  ragged_pieces_case<std::int32_t>("piece boundaries", b, e, static_cast<std::uint64_t>(n));
  ragged_pieces_case<float>("piece boundaries", b, e, static_cast<std::uint64_t>(n));
  ragged_pieces_case<double>("piece boundaries", b, e, static_cast<std::uint64_t>(n));
  ragged_pieces_case<std::uint8_t>("piece boundaries", b, e, static_cast<std::uint64_t>(n));
  // The same with three more segments over (nearly) the whole input: more pieces than the
  // workspace's partials at each piece size, so the kernel takes pieces a few times as long,
  // still several to a segment.
  std::vector<std::int64_t> bo = b, eo = e;
  bo.insert(bo.end(), {0, 1, 3}), eo.insert(eo.end(), {n, n, n - 2});
  ragged_pieces_case<std::int32_t>("piece boundaries and overlaps", bo, eo, static_cast<std::uint64_t>(n));
  ragged_pieces_case<float>("piece boundaries and overlaps", bo, eo, static_cast<std::uint64_t>(n));
  // Segments overlapping many times over (each the whole input, or most of it): far more pieces
  // than the plan's bound of ceil(n / chunk) + segments partials, so the kernel takes pieces as
  // long as the input (one a segment).
  b.assign(300, 0), e.assign(300, n);
  for (std::size_t s = 0; s < b.size(); s += 3) b[s] = static_cast<std::int64_t>(s), e[s] = n - static_cast<std::int64_t>(s % 7);
  ragged_pieces_case<float>("300 overlapping segments", b, e, static_cast<std::uint64_t>(n));
  ragged_pieces_case<std::int32_t>("300 overlapping segments", b, e, static_cast<std::uint64_t>(n));
  // kPiecesMaxSegments segments with heavy-tailed lengths, empty ones included.
  std::mt19937_64 rng(test_seed() + 29);
  b.clear(), e.clear();
  std::int64_t at = 0;
  for (std::uint64_t s = 0; s < seg::kPiecesMaxSegments; ++s) {
    const double u = std::uniform_real_distribution<double>(1e-4, 1.0)(rng);
    const std::int64_t len = s % 5 == 0 ? 0 : static_cast<std::int64_t>(4.0 * std::pow(u, -1.0 / 1.2));
    b.push_back(at), e.push_back(at + len);
    at += len;
  }
  ragged_pieces_case<float>("1024 heavy-tailed segments", b, e, static_cast<std::uint64_t>(std::max<std::int64_t>(at, 1)));

  // Float sums: the same bits twice and in a captured graph.
  const std::uint64_t fn = small_only() ? (1u << 18) : (1u << 22);
  const auto fi = static_cast<std::int64_t>(fn);
  const std::vector<std::int64_t> fb{0, 5, 1000, 1000, 300000 % fi, 7}, fe{5, 1000, fi - 3, 1000, fi, fi};
  const std::uint64_t fs = fb.size();
  const auto xf = random_vector<float>(fn, test_seed() + 31, -1, 1);
  device_buffer d(fn * 4), db(fs * 8), de(fs * 8), o1(fs * 4), o2(fs * 4), o3(fs * 4);
  d.upload(xf.data(), fn * 4), db.upload(fb.data(), fs * 8), de.upload(fe.data(), fs * 8);
  const auto* pb = static_cast<const std::int64_t*>(db.get());
  const auto* pe = static_cast<const std::int64_t*>(de.get());
  reduce_segments(d.get(), fn, pb, pe, fs, dtype::f32, op::sum, o1.get());
  ASSERT_EQ(seg::last_plan().how, seg::strategy::pieces);
  reduce_segments(d.get(), fn, pb, pe, fs, dtype::f32, op::sum, o2.get());
  {
    captured_call cap([&](stream_t st) { reduce_segments(d.get(), fn, pb, pe, fs, dtype::f32, op::sum, o3.get(), st); });
    ASSERT_TRUE(cap.ok);
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(cap.replay());
  }
  std::vector<float> h1(fs), h2(fs), h3(fs);
  o1.download(h1.data(), fs * 4), o2.download(h2.data(), fs * 4), o3.download(h3.data(), fs * 4);
  EXPECT_EQ(std::memcmp(h1.data(), h2.data(), fs * 4), 0);
  EXPECT_EQ(std::memcmp(h1.data(), h3.data(), fs * 4), 0);
  for (std::uint64_t s = 0; s < fs; ++s) {
    long double want = 0, abs = 0;
    for (std::int64_t k = fb[s]; k < fe[s]; ++k) want += xf[static_cast<std::size_t>(k)], abs += std::fabs(xf[static_cast<std::size_t>(k)]);
    const auto len = static_cast<std::uint64_t>(fe[s] - fb[s]);
    EXPECT_LE(std::fabs(h1[s] - static_cast<double>(want)), static_cast<double>(gamma_h(len + 1, 0x1p-24L) * abs)) << "segment " << s;
  }

  // A pieces plan forced onto more segments than pieces may take is refused before any launch.
  const seg::plan forced = last_ragged_candidate(pb, pe, fs, fn, seg::strategy::pieces);
  ASSERT_EQ(forced.how, seg::strategy::pieces);
  const std::uint64_t many = seg::kPiecesMaxSegments + 1;
  std::vector<std::int64_t> mb(many), me(many);
  for (std::uint64_t s = 0; s < many; ++s) mb[s] = me[s] = static_cast<std::int64_t>(s);
  device_buffer mdb(many * 8), mde(many * 8), mo(many * 4);
  mdb.upload(mb.data(), many * 8), mde.upload(me.data(), many * 8);
  {
    seg::plan more = forced;
    more.chunks = (fn + forced.chunk - 1) / forced.chunk + many;
    const forced_plan f(more);
    EXPECT_THROW(reduce_segments(d.get(), fn, static_cast<const std::int64_t*>(mdb.get()),
                                 static_cast<const std::int64_t*>(mde.get()), many, dtype::f32, op::sum, mo.get()),
                 error);
  }
  // And one made for another n (its bound of partials would not hold this input's pieces).
  const forced_plan f(forced);
  EXPECT_THROW(reduce_segments(d.get(), fn / 2, static_cast<const std::int64_t*>(mdb.get()),
                               static_cast<const std::int64_t*>(mde.get()), fs, dtype::f32, op::sum, mo.get()),
               error);
}

TEST(SegmentedGpu, DeterministicAndGraphCapturable) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t rows = 6, cols = small_only() ? 50000 : (1u << 20) + 3;
  const auto x = random_vector<float>(rows * cols, test_seed(), -1, 1);
  device_buffer d(x.size() * 4), o1(rows * 4), o2(rows * 4), o3(rows * 4);
  d.upload(x.data(), x.size() * 4);
  reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::sum, o1.get());
  reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::sum, o2.get());
  {
    captured_call cap([&](stream_t s) { reduce_rows(d.get(), rows, cols, cols, dtype::f32, op::sum, o3.get(), s); });
    ASSERT_TRUE(cap.ok);
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(cap.replay());
  }
  const auto a = results_to_values(o1.get(), rows, dtype::f32, op::sum);
  const auto b = results_to_values(o2.get(), rows, dtype::f32, op::sum);
  const auto c = results_to_values(o3.get(), rows, dtype::f32, op::sum);
  for (std::uint64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(a[r], b[r]);
    EXPECT_EQ(a[r], c[r]);
    long double want = 0, abs = 0;
    for (std::uint64_t k = 0; k < cols; ++k) want += x[r * cols + k], abs += std::fabs(x[r * cols + k]);
    EXPECT_LE(std::fabs(a[r].as_double() - static_cast<double>(want)), static_cast<double>(gamma_h(cols, 0x1p-24L) * abs));
  }
}

}  // namespace
}  // namespace tally::test
