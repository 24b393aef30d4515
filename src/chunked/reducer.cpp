// tally::reducer: the public face of the chunked layer (accumulation + staging).
#include <cuda_runtime_api.h>

#include <string>

#include "chunked/staging.hpp"
#include "core/api_internal.hpp"
#include "tally/tally.hpp"

namespace tally {

struct reducer::impl {
  chunked::spec spec;
  const core::device_context* dev;
  cudaStream_t stream;
  chunked::accumulation_memory memory;
  chunked::accumulation acc;
  impl(const chunked::spec& s, const core::device_context& d, cudaStream_t st)
      : spec(s), dev(&d), stream(st), memory(), acc(s, d, st, memory) {}
};

namespace {

reducer::impl& checked(reducer::impl* p, const char* fn) {
  if (p == nullptr) throw error(std::string("tally::reducer::") + fn + ": this reducer was moved from");
  return *p;
}

// Makes the reducer's device current for a call (its stream, buffers and kernels live there), and
// restores the caller's device afterwards.
struct on_device : core::device_scope {
  explicit on_device(const reducer::impl& r) : core::device_scope(r.dev->ordinal, "cudaSetDevice(the reducer's device)") {}
};

chunked::source source_of(const reducer::impl& r, const char* fn, const char* name, const void* p, std::uint64_t n) {
  core::check_input_pointer(fn, name, p, n, r.spec.t);
  return chunked::source_for(fn, name, p, n, r.spec.t, r.spec.opt.check_memory, *r.dev);
}

void refuse_capture(const reducer::impl& r, const char* fn) {
  if (core::capturing(r.stream))
    throw error(std::string("tally::") + fn +
                ": the reducer's stream is being captured; a reducer waits for its results on the host, which a "
                "graph cannot do");
}

}  // namespace

reducer reducer::for_reduce(dtype t, op o, const options& opt, stream_t stream) {
  return reducer(new impl({chunked::what::reduce, t, o, opt}, core::current_context(),
                          reinterpret_cast<cudaStream_t>(stream)));
}
reducer reducer::for_dot(dtype t, const options& opt, stream_t stream) {
  return reducer(new impl({chunked::what::dot, t, op::sum, opt}, core::current_context(),
                          reinterpret_cast<cudaStream_t>(stream)));
}
reducer reducer::for_stats(dtype t, const options& opt, stream_t stream) {
  return reducer(new impl({chunked::what::stats, t, op::sum, opt}, core::current_context(),
                          reinterpret_cast<cudaStream_t>(stream)));
}

reducer::~reducer() { delete p_; }
reducer::reducer(reducer&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
reducer& reducer::operator=(reducer&& o) noexcept {
  if (this != &o) {
    delete p_;
    p_ = o.p_;
    o.p_ = nullptr;
  }
  return *this;
}

void reducer::feed(const void* data, std::uint64_t n) {
  impl& r = checked(p_, "feed");
  if (r.spec.w == chunked::what::dot)
    throw error("tally::reducer::feed: a dot reducer takes two inputs: feed(x, y, n)");
  const on_device guard(r);
  const chunked::source s = source_of(r, "reducer::feed", "data", data, n);
  if (s.kind != chunked::source::from::device) refuse_capture(r, "reducer::feed");
  chunked::feed(r.acc, &s, 1, n);
}

void reducer::feed(const void* x, const void* y, std::uint64_t n) {
  impl& r = checked(p_, "feed");
  if (r.spec.w != chunked::what::dot)
    throw error("tally::reducer::feed: two inputs are for a dot reducer (reducer::for_dot)");
  const on_device guard(r);
  const chunked::source s[2] = {source_of(r, "reducer::feed", "x", x, n), source_of(r, "reducer::feed", "y", y, n)};
  if (s[0].kind != chunked::source::from::device || s[1].kind != chunked::source::from::device)
    refuse_capture(r, "reducer::feed");
  chunked::feed(r.acc, s, 2, n);
}

void reducer::feed_from(std::uint64_t n, fill_fn fill, void* context) {
  impl& r = checked(p_, "feed_from");
  if (fill == nullptr && n > 0) throw error("tally::reducer::feed_from: fill is null");
  const on_device guard(r);
  refuse_capture(r, "reducer::feed_from");
  chunked::source s[2];
  for (chunked::source& x : s) {
    x.kind = chunked::source::from::producer;
    x.fill = fill;
    x.context = context;
  }
  chunked::feed(r.acc, s, r.spec.w == chunked::what::dot ? 2 : 1, n);
}

value reducer::result() {
  impl& r = checked(p_, "result");
  if (r.spec.w == chunked::what::stats) throw error("tally::reducer::result: a stats reducer gives stats_result()");
  const on_device guard(r);
  return r.acc.result();
}

stats reducer::stats_result() {
  impl& r = checked(p_, "stats_result");
  if (r.spec.w != chunked::what::stats)
    throw error("tally::reducer::stats_result: this reducer was made by for_reduce or for_dot: use result()");
  const on_device guard(r);
  return r.acc.stats_result();
}

std::uint64_t reducer::count() const noexcept { return p_ == nullptr ? 0 : p_->acc.count(); }

void reducer::reset() {
  impl& r = checked(p_, "reset");
  const on_device guard(r);
  r.acc.reset();
}

}  // namespace tally
