// Storage types of the 16-bit float inputs: the bits only (IEEE binary16 and bfloat16). The
// kernels convert each element to f32 (ops.cuh, as_num); host code only needs the names.
#pragma once

#include <cstdint>

namespace tally::core {

struct f16_t {
  std::uint16_t bits;
};
struct bf16_t {
  std::uint16_t bits;
};

}  // namespace tally::core
