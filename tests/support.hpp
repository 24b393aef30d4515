// Test support: the GPU guard, an independent CPU reference, and random data with its seed.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/tally.hpp"

namespace tally::test {

// GPU tests skip (visibly, with the reason) on machines without a GPU, such as CI.
#define TALLY_REQUIRE_GPU()                                                           \
  do {                                                                                \
    if (::tally::device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine"; \
  } while (0)

// The message of the tally::error that fn throws ("" if it throws none).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

// The message of any std::exception fn throws ("" if it throws none): a producer's own exception
// comes back as it was thrown.
inline std::string error_of_any(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// An environment variable set for a scope (restored on the way out, exceptions too).
struct scoped_env {
  std::string name, old;
  bool had = false;
  scoped_env(const char* n, const char* value) : name(n) {
    if (const char* o = std::getenv(n)) had = true, old = o;
    setenv(n, value, 1);
  }
  ~scoped_env() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
};

// TALLY_TEST_SMALL=1 (set under compute-sanitizer) keeps every size at or below 2^16.
inline bool small_only() {
  const char* v = std::getenv("TALLY_TEST_SMALL");
  return v && *v && *v != '0';
}

inline std::uint64_t test_seed() {
  const char* v = std::getenv("TALLY_TEST_SEED");
  return v ? std::strtoull(v, nullptr, 10) : 20261122u;
}

// The reference result, computed without any of tally's code.
struct reference {
  bool is_float = false;
  std::uint64_t bits = 0;   // integer results: the 64-bit pattern (two's complement for signed)
  long double exact = 0;    // float sums/products: accurate value
  long double abs_sum = 0;  // float sums: sum of |x|
  bool nan = false;
};

template <class T>
std::uint64_t to_bits(T x) {
  if constexpr (std::is_signed_v<T>) return static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
  else return static_cast<std::uint64_t>(x);
}

template <class T>
reference compute_reference(const T* x, std::uint64_t n, op o) {
  reference r;
  r.is_float = std::is_floating_point_v<T>;
  if constexpr (std::is_floating_point_v<T>) {
    switch (o) {
      case op::sum: {  // Neumaier compensated summation in long double
        long double s = 0, c = 0, a = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
          const long double v = x[i];
          if (std::isnan(v)) r.nan = true;
          const long double t = s + v;
          c += std::fabs(s) >= std::fabs(v) ? (s - t) + v : (v - t) + s;
          s = t;
          a += std::fabs(v);
        }
        r.exact = s + c;
        r.abs_sum = a;
        break;
      }
      case op::prod: {
        long double p = 1;
        for (std::uint64_t i = 0; i < n; ++i) p *= x[i];
        r.exact = p;
        break;
      }
      case op::min:
      case op::max: {
        long double m = o == op::min ? INFINITY : -INFINITY;
        for (std::uint64_t i = 0; i < n; ++i) {
          if (std::isnan(x[i])) r.nan = true;
          else m = o == op::min ? std::min<long double>(m, x[i]) : std::max<long double>(m, x[i]);
        }
        r.exact = m;
        break;
      }
      case op::all:
      case op::any: {
        bool acc = o == op::all;
        for (std::uint64_t i = 0; i < n; ++i) acc = o == op::all ? (acc && x[i] != 0) : (acc || x[i] != 0);
        r.is_float = false;
        r.bits = acc;
        break;
      }
      default: break;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (o) {
      case op::sum: {
        std::uint64_t s = 0;
        for (std::uint64_t i = 0; i < n; ++i) s += to_bits(x[i]);
        r.bits = s;
        break;
      }
      case op::prod: {
        std::uint64_t p = 1;
        for (std::uint64_t i = 0; i < n; ++i) p *= to_bits(x[i]);
        r.bits = p;
        break;
      }
      case op::min: {
        T m = std::numeric_limits<T>::max();
        for (std::uint64_t i = 0; i < n; ++i) m = x[i] < m ? x[i] : m;
        r.bits = to_bits(m);
        break;
      }
      case op::max: {
        T m = std::numeric_limits<T>::lowest();
        for (std::uint64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
        r.bits = to_bits(m);
        break;
      }
      case op::bit_and:
      case op::bit_or:
      case op::bit_xor: {
        U acc = o == op::bit_and ? static_cast<U>(~U(0)) : U(0);
        for (std::uint64_t i = 0; i < n; ++i) {
          const U v = static_cast<U>(x[i]);
          acc = o == op::bit_and ? U(acc & v) : o == op::bit_or ? U(acc | v) : U(acc ^ v);
        }
        r.bits = to_bits(static_cast<T>(acc));
        break;
      }
      case op::all:
      case op::any: {
        bool acc = o == op::all;
        for (std::uint64_t i = 0; i < n; ++i) acc = o == op::all ? (acc && x[i] != 0) : (acc || x[i] != 0);
        r.bits = acc;
        break;
      }
      default: break;  // argmin/argmax, mean, sum_sq, norm2: see numerics_reference.hpp
    }
  }
  return r;
}

// The bits of an integer-like value as the reference stores them.
inline std::uint64_t value_bits(const value& v) {
  if (v.type == dtype::u8 || v.type == dtype::u16 || v.type == dtype::u32 || v.type == dtype::u64)
    return v.u;
  return static_cast<std::uint64_t>(v.i);
}

// gamma_h = h u / (1 - h u)
inline long double gamma_h(long double h, long double u) { return h * u / (1 - h * u); }

template <class T>
long double ulp_of(long double x) {
  const T t = static_cast<T>(x);
  return std::fabs(static_cast<long double>(std::nextafter(t, std::numeric_limits<T>::infinity())) - t);
}

// Random elements of T: integers over their whole range (or [lo, hi]), floats in [lo, hi).
template <class T>
std::vector<T> random_vector(std::uint64_t n, std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = static_cast<T>(d(rng));
  } else {
    using W = std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;
    // Clamp in double first: double(max of a 64-bit type) rounds up past it, and converting
    // that back is undefined.
    const W wlo = lo <= static_cast<double>(std::numeric_limits<T>::lowest()) ? W(std::numeric_limits<T>::lowest())
                                                                               : static_cast<W>(lo);
    const W whi = hi >= static_cast<double>(std::numeric_limits<T>::max()) ? W(std::numeric_limits<T>::max())
                                                                           : static_cast<W>(hi);
    std::uniform_int_distribution<W> d(wlo, whi);
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

// A host vector copied to a new device allocation (16 bytes for an empty one, so the pointer is
// never null).
template <class T>
device_buffer to_device(const std::vector<T>& h) {
  device_buffer d(h.empty() ? 16 : h.size() * sizeof(T));
  if (!h.empty()) d.upload(h.data(), h.size() * sizeof(T));
  return d;
}

}  // namespace tally::test
