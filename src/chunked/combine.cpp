#include "chunked/combine.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/api_internal.hpp"
#include "core/exact.cuh"

namespace tally::chunked {
namespace {

bool is_float(dtype t) { return t == dtype::f32 || t == dtype::f64 || t == dtype::f16 || t == dtype::bf16; }
bool is_signed_int(dtype t) {
  return t == dtype::i8 || t == dtype::i16 || t == dtype::i32 || t == dtype::i64;
}
bool is_arg(op o) { return o == op::argmin || o == op::argmax; }
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The value x rounded to the result dtype r (f32 or f64).
value float_value(dtype r, double x) {
  value v;
  v.type = r;
  v.f = r == dtype::f32 ? static_cast<double>(static_cast<float>(x)) : x;
  return v;
}

// The order min/max use: -0.0 below +0.0, so the result never depends on the combine order.
bool below(double a, double b) { return a < b || (a == b && std::signbit(a) && !std::signbit(b)); }

// The op whose result a piece's partial is (decode_value reads it as that op's result).
op decode_op(const spec& s) {
  if (s.w != what::reduce) return op::sum;
  return s.o == op::mean ? op::sum : s.o;
}

// An exact 128-bit integer sum over n as a double, converted as the core's integer mean converts
// it (op_mean_int::finalize in core/ops.cuh), so a chunked mean has the same bits as one launch.
double wide_mean(__int128 s, std::uint64_t n) {
  if (s >= INT64_MIN && s <= INT64_MAX) return static_cast<double>(static_cast<std::int64_t>(s)) / static_cast<double>(n);
  const bool neg = s < 0;
  const unsigned __int128 m = neg ? -static_cast<unsigned __int128>(s) : static_cast<unsigned __int128>(s);
  const double mag = static_cast<double>(static_cast<std::uint64_t>(m >> 64)) * 0x1p64 +
                     static_cast<double>(static_cast<std::uint64_t>(m));
  return (neg ? -mag : mag) / static_cast<double>(n);
}

}  // namespace

std::size_t encode_result(const spec& s, const value& v, unsigned char* out) {
  const bool arg = s.w == what::reduce && is_arg(s.o);
  unsigned char* at = out;
  if (arg) {
    std::memcpy(out, &v.index, 8);
    at = out + 8;
  }
  const std::size_t size = dtype_size(v.type);
  switch (v.type) {
    case dtype::f32: {
      const float f = static_cast<float>(v.f);
      std::memcpy(at, &f, 4);
      break;
    }
    case dtype::f64: std::memcpy(at, &v.f, 8); break;
    default: std::memcpy(at, &v.u, size); break;  // integers and b8: the low bytes (little-endian)
  }
  return arg ? 16 : size;
}

std::size_t carry_bytes() { return (core::exact::kWords + 1) * sizeof(long long); }

piece_plan plan_for(const spec& s) {
  piece_plan p;
  const options& opt = s.opt;
  if (s.w == what::stats) {
    const std::string why = core::stats_op_refusal(s.t, opt);
    if (!why.empty()) throw error("tally::reducer (stats): " + why);
    p.kind = opt.nan == nan_policy::ignore && is_float(s.t) ? core::kind::stats_ignore : core::kind::stats;
    p.partial_bytes = sizeof(stats);
    return p;
  }
  if (s.w == what::dot) {
    const std::string why = core::dot_op_refusal(s.t, opt);
    if (!why.empty()) throw error("tally::reducer (dot): " + why);
    p.exact = opt.mode == accuracy::exact;
    p.kind = p.exact ? core::kind::dot_exact : opt.mode == accuracy::compensated ? core::kind::dot_comp : core::kind::dot;
    p.partial_bytes = p.exact ? 0 : dtype_size(s.t == dtype::f64 ? dtype::f64 : dtype::f32);
    return p;
  }
  const std::string why = core::op_refusal(s.t, s.o, opt);
  if (!why.empty()) throw error(std::string("tally::reducer (") + to_string(s.o) + "): " + why);
  if (s.o == op::mean && is_float(s.t)) {
    // The pieces' sums (in the mode asked for), divided by n at the end.
    options sum_opt = opt;
    p.kind = core::kind_for(s.t, op::sum, sum_opt);
    p.exact = opt.mode == accuracy::exact;
    p.partial_bytes = p.exact ? 0 : result_bytes(s.t, op::sum);
    return p;
  }
  if (s.o == op::mean) {  // integers: exact sums of the pieces
    // A piece's 64-bit sum may wrap (any integer type, for a long enough device piece): its
    // mean, from the core's 128-bit sum, gives back the high bits.
    p.kind = core::kind::sum;
    p.with_mean = true;
    p.partial_bytes = 16;
    return p;
  }
  p.kind = core::kind_for(s.t, s.o, opt);
  p.exact = opt.mode == accuracy::exact;  // op_refusal allows modes only for float sum and mean
  p.partial_bytes = p.exact ? 0 : result_bytes(s.t, s.o);
  return p;
}

combiner::combiner(const spec& s) : spec_(s), plan_(plan_for(s)) {
  if (s.w == what::reduce) r_ = result_dtype(s.t, s.o);
  else if (s.w == what::dot) r_ = s.t == dtype::f64 ? dtype::f64 : dtype::f32;
  else r_ = dtype::f64;
  reset();
}

void combiner::add_exact(const long long* words, unsigned flags) {
  if (!plan_.exact) throw error("tally: internal error: an exact sum added to a reduction that is not exact");
  if (extra_.empty()) extra_.assign(core::exact::kWords, 0);
  for (int k = 0; k < core::exact::kWords; ++k) extra_[static_cast<std::size_t>(k)] += words[k];
  core::exact::normalize(extra_.data());
  extra_flags_ |= flags;
}

void combiner::reset() {
  extra_.clear();
  extra_flags_ = 0;
  s_ = c_ = 0;
  nan_ = false;
  wide_ = 0;
  st_ = stats{};
  if (spec_.w == what::reduce) {
    best_ = identity(spec_.t, spec_.o, spec_.opt);
    if (spec_.o == op::prod && is_float(spec_.t)) s_ = 1;
  }
}

void combiner::fold(const unsigned char* p, std::uint64_t first, std::uint64_t count) {
  if (plan_.exact) return;
  if (spec_.w == what::stats) {
    stats b;
    std::memcpy(&b, p, sizeof b);
    if (b.count == 0) return;
    if (st_.count == 0) {
      st_ = b;
      return;
    }
    const double na = static_cast<double>(st_.count), nb = static_cast<double>(b.count), n = na + nb;
    const double delta = b.mean - st_.mean;
    st_.m2 = st_.m2 + b.m2 + delta * delta * (na * nb / n);
    st_.sum += b.sum;
    st_.count += b.count;
    st_.mean = st_.sum / static_cast<double>(st_.count);
    st_.min = std::isnan(st_.min) || std::isnan(b.min) ? kNaN : std::fmin(st_.min, b.min);
    st_.max = std::isnan(st_.max) || std::isnan(b.max) ? kNaN : std::fmax(st_.max, b.max);
    return;
  }
  // Half inputs have f32 partials: decode them as the f32 form of the same op.
  const dtype t = spec_.t == dtype::f16 || spec_.t == dtype::bf16 ? dtype::f32 : spec_.t;
  const value v = core::decode_value(t, decode_op(spec_), p);
  const bool fl = is_float(spec_.t);
  const bool comp = spec_.opt.mode == accuracy::compensated;
  auto add_float = [&](double x) {
    if (!comp) {
      s_ += x;
      return;
    }
    const double t = s_ + x;  // Neumaier
    c_ += std::fabs(s_) >= std::fabs(x) ? (s_ - t) + x : (x - t) + s_;
    s_ = t;
  };
  if (spec_.w == what::dot) {
    add_float(v.f);
    return;
  }
  switch (spec_.o) {
    case op::sum:
      if (fl) add_float(v.f);
      else best_.u += v.u;  // modulo 2^64, as the core's integer sums
      return;
    case op::prod:
      if (fl) s_ *= v.f;
      else best_.u *= v.u;
      return;
    case op::mean:
      if (fl) {
        add_float(v.f);
      } else {
        // The piece's sum modulo 2^64 (exact) and its mean (within a few ulps): the multiple of
        // 2^64 that brings the first within 2^63 of mean x count is the true sum's.
        double mean;
        std::memcpy(&mean, p + 8, 8);
        const __int128 low = is_signed_int(spec_.t) ? static_cast<__int128>(v.i) : static_cast<__int128>(v.u);
        const double approx = mean * static_cast<double>(count);
        const double high = std::nearbyint((approx - static_cast<double>(low)) / 18446744073709551616.0);
        wide_ += low + static_cast<__int128>(high) * (static_cast<__int128>(1) << 64);
      }
      return;
    case op::min:
    case op::max: {
      const bool mx = spec_.o == op::max;
      if (!fl) {
        const bool better = is_signed_int(r_) ? (mx ? v.i > best_.i : v.i < best_.i) : (mx ? v.u > best_.u : v.u < best_.u);
        if (better) best_ = v;
        return;
      }
      const bool ignore = spec_.opt.nan == nan_policy::ignore;
      if (std::isnan(v.f)) {
        if (!ignore && !std::isnan(best_.f)) best_ = v;
        return;
      }
      if (std::isnan(best_.f)) {
        if (ignore) best_ = v;  // under propagation a NaN stays
        return;
      }
      if (mx ? below(best_.f, v.f) : below(v.f, best_.f)) best_ = v;
      return;
    }
    case op::argmin:
    case op::argmax: {
      if (v.index < 0) return;  // an empty or all-NaN piece
      value g = v;
      g.index = v.index + static_cast<std::int64_t>(first);
      if (best_.index < 0) {
        best_ = g;
        return;
      }
      const bool mx = spec_.o == op::argmax;
      if (fl) {
        if (std::isnan(best_.f)) return;  // the first NaN wins
        if (std::isnan(g.f) || (mx ? g.f > best_.f : g.f < best_.f)) best_ = g;
        return;
      }
      const bool better = is_signed_int(r_) ? (mx ? g.i > best_.i : g.i < best_.i) : (mx ? g.u > best_.u : g.u < best_.u);
      if (better) best_ = g;  // ties keep the earlier index
      return;
    }
    case op::bit_and: best_.u &= v.u; return;
    case op::bit_or: best_.u |= v.u; return;
    case op::bit_xor: best_.u ^= v.u; return;
    case op::all: best_.i = (best_.i != 0 && v.i != 0) ? 1 : 0; return;
    case op::any: best_.i = (best_.i != 0 || v.i != 0) ? 1 : 0; return;
    case op::sum_sq: s_ += v.f; return;
    case op::norm2: {
      // s_ = scale (the largest piece norm so far), c_ = sum of (norm / scale)^2: no overflow.
      const double x = v.f;
      if (std::isnan(x)) nan_ = true;
      else if (x > s_) c_ = 1.0 + (s_ > 0 ? c_ * (s_ / x) * (s_ / x) : 0.0), s_ = x;
      else if (x > 0) c_ += (x / s_) * (x / s_);
      return;
    }
  }
}

value combiner::result(const long long* carry, std::uint64_t n) const {
  if (spec_.w == what::stats) throw error("tally::reducer: a stats reducer's result is stats_result()");
  if (plan_.exact) {
    if (carry == nullptr) throw error("tally: internal error: an exact chunked reduction without its carry");
    long long w[core::exact::kWords];
    std::memcpy(w, carry, sizeof w);
    core::exact::normalize(w);
    unsigned flags = static_cast<unsigned>(carry[core::exact::kWords]);
    if (!extra_.empty()) {  // both normalised: each word takes the other's without overflow
      for (int k = 0; k < core::exact::kWords; ++k) w[k] += extra_[static_cast<std::size_t>(k)];
      core::exact::normalize(w);
      flags |= extra_flags_;
    }
    if (spec_.w == what::reduce && spec_.o == op::mean) {
      if (n == 0) return float_value(r_, kNaN);
      return float_value(r_, core::exact::round_to<double>(w, flags) / static_cast<double>(n));
    }
    if (r_ == dtype::f32) return float_value(r_, core::exact::round_to<float>(w, flags));
    return float_value(r_, core::exact::round_to<double>(w, flags));
  }
  const bool fl = is_float(spec_.t);
  if (spec_.w == what::dot) return float_value(r_, s_ + c_);
  switch (spec_.o) {
    case op::sum:
      if (fl) return float_value(r_, s_ + c_);
      return best_;
    case op::prod:
      if (fl) return float_value(r_, s_);
      return best_;
    case op::mean:
      if (n == 0) return identity(spec_.t, spec_.o, spec_.opt);
      if (fl) return float_value(r_, (s_ + c_) / static_cast<double>(n));
      return float_value(r_, wide_mean(wide_, n));
    case op::argmin:
    case op::argmax:
      if (best_.index < 0) return identity(spec_.t, spec_.o, spec_.opt);
      return best_;
    case op::sum_sq: return float_value(r_, s_);
    case op::norm2:
      if (nan_) return float_value(r_, kNaN);
      if (std::isinf(s_)) return float_value(r_, s_);
      return float_value(r_, s_ * std::sqrt(c_));
    default: return best_;  // min, max, bitwise, logical
  }
}

stats combiner::stats_result() const {
  if (spec_.w != what::stats) throw error("tally::reducer: stats_result() is for a stats reducer");
  stats s = st_;
  if (s.count == 0) s.min = s.max = s.mean = kNaN, s.m2 = 0;
  else if (!std::isfinite(s.sum)) s.m2 = kNaN;  // an infinite element or an overflow: the device's rule
  else if (s.m2 < 0) s.m2 = 0;
  return s;
}

}  // namespace tally::chunked
