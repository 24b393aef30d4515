#include "dist/partial.hpp"

#include "core/api_internal.hpp"
#include "core/context.hpp"
#include "core/memory.hpp"

namespace tally::dist {

using core::check_cuda;

const char* fn_name(chunked::what w, bool async) {
  switch (w) {
    case chunked::what::reduce: return async ? "dist::reduce_async" : "dist::reduce";
    case chunked::what::dot: return async ? "dist::dot_async" : "dist::dot";
    case chunked::what::stats: return async ? "dist::reduce_stats_async" : "dist::reduce_stats";
  }
  return "dist";
}

std::string qualified(const char* fn) { return std::string("tally::") + fn; }

communicator::impl& usable(const communicator& c, const char* fn) {
  communicator::impl* p = c.get();
  if (p == nullptr) throw error(qualified(fn) + ": the communicator was moved from");
  if (!p->usable) throw error(qualified(fn) + ": the communicator was aborted after an earlier failure; make a new one");
  return *p;
}

namespace {

// A shard in another GPU's memory than the communicator's: refused by name (a kernel of this GPU
// would read it over the link at best, or fault without peer access).
void check_shard_device(const char* fn, const char* name, const void* p, int device, const core::memory_facts& f) {
  if (f.known && f.kind == core::memory_kind::device && f.device != device)
    throw error(qualified(fn) + ": " + name + " " + core::pointer_text(p) + " is memory of device " +
                std::to_string(f.device) + ", but this rank's communicator is on device " + std::to_string(device) +
                ": give each rank a shard on its own GPU (cudaSetDevice(comm.device()) before allocating it)");
}

void refuse_capture(cudaStream_t s, const char* fn) {
  if (core::capturing(s))
    throw error(qualified(fn) + ": the stream is being captured: capture " + qualified(fn) +
                "_async (the blocking form combines the ranks' partials on the host before it returns)");
}

}  // namespace

std::string launch_partial(communicator::impl& c, const shard& sh, const chunked::spec& s, cudaStream_t stream,
                           unsigned char* d_record, bool allow_capture) {
  const char* fn = fn_name(s.w, allow_capture);
  try {
    if (!allow_capture) refuse_capture(stream, fn);
    const chunked::piece_plan pp = chunked::plan_for(s);  // refuses unsupported (dtype, op, options)
    if (sh.n > 0) {
      core::check_input_pointer(fn, "the shard", sh.d_in, sh.n, s.t);
      if (s.w == chunked::what::dot) core::check_input_pointer(fn, "the shard of y", sh.d_in2, sh.n, s.t);
      const core::device_context& dev = core::current_context();
      // One driver query per input: which GPU holds it (refused by name if another), then the
      // memory check on the same record.
      const auto check_shard = [&](const char* name, const void* p) {
        const core::memory_facts f = core::inspect_memory(p, dev.ordinal);
        check_shard_device(fn, name, p, c.device, f);
        if (s.opt.check_memory) core::check_input_reach(fn, name, p, sh.n, s.t, dev, &f);
      };
      check_shard("the shard", sh.d_in);
      if (s.w == chunked::what::dot) check_shard("the shard of y", sh.d_in2);
      if (pp.exact) {
        long long* carry = reinterpret_cast<long long*>(d_record + kCarryOffset);
        check_cuda(cudaMemsetAsync(carry, 0, chunked::carry_bytes(), stream), "cudaMemsetAsync(the shard's exact accumulator)");
        core::launch_kind(pp.kind, s.t, sh.d_in, sh.d_in2, sh.n, nullptr, stream, dev, carry);
      } else {
        unsigned char* slot = d_record + kPartialOffset;
        core::launch_kind(pp.kind, s.t, sh.d_in, sh.d_in2, sh.n, slot, stream, dev);
        if (pp.with_mean) core::launch_kind(core::kind::mean, s.t, sh.d_in, sh.d_in2, sh.n, slot + 8, stream, dev);
      }
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace tally::dist
