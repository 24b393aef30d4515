// The public API's argument checks and dispatch helpers, shared by the layers that add entry
// points of their own (src/segmented/api.cpp). Defined in api.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "context.hpp"
#include "memory.hpp"
#include "tally/tally.hpp"

namespace tally::core {

std::string op_refusal(dtype t, op o, const options& opt);  // "" when (t, o, opt) is supported
std::string stats_op_refusal(dtype t, const options& opt);
std::string dot_op_refusal(dtype t, const options& opt);
kind kind_for(dtype t, op o, const options& opt);
void check_input_pointer(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t);
// d_out must be non-null and aligned to `align`; what() describes the result for the message and
// runs only when the check fails (no string is built on the call path).
[[noreturn]] void throw_bad_output(const char* fn, const void* p, std::size_t align, const std::string& what);
template <class What>
void check_output_pointer(const char* fn, const void* p, std::size_t align, What&& what) {
  if (p == nullptr || reinterpret_cast<std::uintptr_t>(p) % align != 0) throw_bad_output(fn, p, align, what());
}
// The memory check of n elements at p (src/core/memory.hpp), after the argument checks; `known`
// as check_memory's.
void check_input_reach(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t,
                       const device_context& dev, const memory_facts* known = nullptr);
value decode_value(dtype t, op o, const unsigned char* h);  // one result as reduce writes it
// Launches kind k over n elements on (dev, stream), the arguments already checked; d_carry: the
// exact kinds' accumulator of a chunked reduction (src/chunked), null for an ordinary result.
void launch_kind(kind k, dtype t, const void* d_in, const void* d_in2, std::uint64_t n, void* d_out,
                 cudaStream_t stream, const device_context& dev, long long* d_carry = nullptr);
std::string pointer_text(const void* p);

}  // namespace tally::core
