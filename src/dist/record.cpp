#include "dist/record.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/exact.cuh"

namespace tally::dist {
namespace {

const char* what_name(int w) {
  switch (static_cast<chunked::what>(w)) {
    case chunked::what::reduce: return "reduce";
    case chunked::what::dot: return "dot";
    case chunked::what::stats: return "reduce_stats";
  }
  return "?";
}

std::string call_text(const header& h) {
  std::string s = std::string(what_name(h.what)) + "(" + to_string(static_cast<dtype>(h.dtype));
  if (static_cast<chunked::what>(h.what) == chunked::what::reduce) s += ", " + std::string(to_string(static_cast<op>(h.op)));
  s += ", nan " + std::string(to_string(static_cast<nan_policy>(h.nan))) + ", mode " +
       to_string(static_cast<accuracy>(h.mode)) + ")";
  return s;
}

std::string range_text(const header& h) {
  return "[" + std::to_string(h.first) + ", " + std::to_string(h.first + h.n) + ")";
}

bool in_range(int v, int count) { return v >= 0 && v < count; }

// The call's fields of a header name a call tally has (a record of another collective or version
// fails this).
bool names_a_call(const header& h) {
  return in_range(h.what, 3) && in_range(h.dtype, kDtypeCount) && in_range(h.op, kOpCount) && in_range(h.nan, 2) &&
         in_range(h.mode, 3);
}

}  // namespace

std::size_t record_bytes() {
  const std::size_t b = kCarryOffset + chunked::carry_bytes();
  return (b + 255) / 256 * 256;
}

header make_header(const chunked::spec& s, int rank, int size, std::uint64_t n, std::uint64_t first,
                   const std::string& own_error) {
  header h;
  h.magic = kMagic;
  h.version = kVersion;
  h.what = static_cast<int>(s.w);
  h.dtype = static_cast<int>(s.t);
  h.op = static_cast<int>(s.o);
  h.nan = static_cast<int>(s.opt.nan);
  h.mode = static_cast<int>(s.opt.mode);
  h.rank = rank;
  h.size = size;
  h.n = n;
  h.first = first;
  h.failed = own_error.empty() ? 0 : 1;
  std::strncpy(h.message, own_error.c_str(), sizeof h.message - 1);
  return h;
}

std::string check_headers(const std::vector<header>& all, const chunked::spec& s) {
  const int size = static_cast<int>(all.size());
  for (int k = 0; k < size; ++k) {
    const header& h = all[k];
    const std::string who = "rank " + std::to_string(k);
    if (h.magic != kMagic || h.version != kVersion)
      return who + " sent no tally record of this version (it called another collective, or runs another tally)";
    if (h.rank != k || h.size != size)
      return who + " says it is rank " + std::to_string(h.rank) + " of " + std::to_string(h.size) + ", not " +
             std::to_string(k) + " of " + std::to_string(size);
    if (!names_a_call(h))
      return who + " sent a malformed record";
  }
  for (int k = 0; k < size; ++k)
    if (all[k].failed) {
      std::string m(all[k].message, strnlen(all[k].message, sizeof all[k].message));
      return "rank " + std::to_string(k) + " failed: " + m;
    }
  // Every rank makes the same call as rank 0 (compared field by field: op only for reduce).
  const header& h0 = all[0];
  for (int k = 1; k < size; ++k) {
    const header& h = all[k];
    const bool same = h.what == h0.what && h.dtype == h0.dtype && h.nan == h0.nan && h.mode == h0.mode &&
                      (static_cast<chunked::what>(h.what) != chunked::what::reduce || h.op == h0.op);
    if (!same)
      return "the ranks disagree: rank 0 called " + call_text(h0) + ", rank " + std::to_string(k) + " " + call_text(h);
  }
  const header mine = make_header(s, 0, size, 0, 0, "");
  if (mine.what != h0.what || mine.dtype != h0.dtype || mine.nan != h0.nan || mine.mode != h0.mode ||
      (s.w == chunked::what::reduce && mine.op != h0.op))
    return "the ranks disagree: rank 0 called " + call_text(h0) + ", this rank " + call_text(mine);
  // The non-empty shards tile [0, total): sorted by first element, each starts where the last ended.
  std::vector<int> order;
  for (int k = 0; k < size; ++k) {
    if (all[k].n == 0) continue;
    if (all[k].first + all[k].n < all[k].first)
      return "rank " + std::to_string(k) + "'s shard runs past 2^64 elements";
    order.push_back(k);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return all[a].first < all[b].first; });
  std::uint64_t next = 0;
  int prev = -1;
  for (int k : order) {
    const header& h = all[k];
    if (h.first < next)
      return "the shards overlap: rank " + std::to_string(k) + "'s " + range_text(h) + " and rank " +
             std::to_string(prev) + "'s " + range_text(all[prev]);
    if (h.first > next)
      return "the shards leave a gap: no rank holds elements [" + std::to_string(next) + ", " + std::to_string(h.first) +
             ") (rank " + std::to_string(k) + "'s shard is " + range_text(h) + ")";
    next = h.first + h.n;
    prev = k;
  }
  return "";
}

namespace {

std::vector<header> headers_of(const unsigned char* records, int size) {
  std::vector<header> hs(static_cast<std::size_t>(size));
  for (int k = 0; k < size; ++k) std::memcpy(&hs[k], records + static_cast<std::size_t>(k) * record_bytes(), sizeof(header));
  return hs;
}

// The combiner with every non-empty shard's partial folded in the order of first elements.
chunked::combiner folded(const unsigned char* records, const std::vector<header>& hs, const chunked::spec& s,
                         std::uint64_t& total) {
  chunked::combiner c(s);
  std::vector<int> order(hs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return hs[a].first < hs[b].first; });
  total = 0;
  for (int k : order) {
    if (hs[k].n == 0) continue;
    total += hs[k].n;
    if (!c.plan().exact) c.fold(records + static_cast<std::size_t>(k) * record_bytes() + kPartialOffset, hs[k].first, hs[k].n);
  }
  return c;
}

}  // namespace

value combine(const unsigned char* records, int size, const chunked::spec& s) {
  const std::vector<header> hs = headers_of(records, size);
  std::uint64_t total = 0;
  const chunked::combiner c = folded(records, hs, s, total);
  if (!c.plan().exact) return c.result(nullptr, total);
  // The exact accumulators: each carry-normalised (words in [0, 2^32) but the top), then added
  // word by word (no word can overflow for fewer than 2^31 ranks), the special-value flags or'ed.
  constexpr int W = core::exact::kWords;
  std::vector<long long> sum(W + 1, 0);
  unsigned flags = 0;
  for (int k = 0; k < size; ++k) {
    if (hs[k].n == 0) continue;
    long long w[W + 1];
    std::memcpy(w, records + static_cast<std::size_t>(k) * record_bytes() + kCarryOffset, sizeof w);
    core::exact::normalize(w);
    for (int i = 0; i < W; ++i) sum[i] += w[i];
    flags |= static_cast<unsigned>(w[W]);
  }
  sum[W] = static_cast<long long>(flags);
  return c.result(sum.data(), total);
}

stats combine_stats(const unsigned char* records, int size, const chunked::spec& s) {
  const std::vector<header> hs = headers_of(records, size);
  std::uint64_t total = 0;
  return folded(records, hs, s, total).stats_result();
}

namespace {

const char* async_name(chunked::what w) {
  switch (w) {
    case chunked::what::reduce: return "reduce_async";
    case chunked::what::dot: return "dot_async";
    case chunked::what::stats: return "reduce_stats_async";
  }
  return "?";
}

// The result of a failed call, as the core would write it (see combine_into).
void write_failure(const chunked::spec& s, unsigned char* out) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  std::memset(out, 0, kResultBytes);
  if (s.w == chunked::what::stats) {
    stats f;
    f.count = 0;
    f.sum = f.min = f.max = f.mean = f.m2 = nan;
    std::memcpy(out, &f, sizeof f);
    return;
  }
  value v;
  v.type = s.w == chunked::what::dot ? (s.t == dtype::f64 ? dtype::f64 : dtype::f32) : result_dtype(s.t, s.o);
  if (v.type == dtype::f32 || v.type == dtype::f64) v.f = nan;
  if (s.w == chunked::what::reduce && (s.o == op::argmin || s.o == op::argmax)) v.index = -1;
  (void)chunked::encode_result(s, v, out);
}

}  // namespace

std::string combine_into(const unsigned char* records, int size, int rank, unsigned char* out) {
  std::memset(out, 0, kResultBytes);
  if (size < 1 || rank < 0 || rank >= size) return "tally::dist: internal error: rank " + std::to_string(rank) + " of " + std::to_string(size);
  header mine;
  std::memcpy(&mine, records + static_cast<std::size_t>(rank) * record_bytes(), sizeof mine);
  const std::string where = " on rank " + std::to_string(rank) + " of " + std::to_string(size) + ": ";
  if (mine.magic != kMagic || mine.version != kVersion || !names_a_call(mine))
    return "tally::dist" + where + "this rank's own record is malformed (its call was not enqueued as a whole)";
  chunked::spec s;
  s.w = static_cast<chunked::what>(mine.what);
  s.t = static_cast<dtype>(mine.dtype);
  s.o = static_cast<op>(mine.op);
  s.opt.nan = static_cast<nan_policy>(mine.nan);
  s.opt.mode = static_cast<accuracy>(mine.mode);
  const std::string fn = std::string("tally::dist::") + async_name(s.w);
  std::string why;
  try {
    why = check_headers(headers_of(records, size), s);
    if (why.empty()) {
      if (s.w == chunked::what::stats) {
        const stats st = combine_stats(records, size, s);
        std::memcpy(out, &st, sizeof st);
      } else {
        (void)chunked::encode_result(s, combine(records, size, s), out);
      }
      return "";
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  try {
    write_failure(s, out);
  } catch (const std::exception&) {
    std::memset(out, 0, kResultBytes);  // a call the core refuses has no result type
  }
  return fn + where + why;
}

}  // namespace tally::dist
