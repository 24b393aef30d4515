#include "cpu/exact_sum.hpp"

#include <cstring>
#include <type_traits>

#include "core/exact.cuh"

namespace tally::cpu {
namespace {

namespace ex = core::exact;

// Elements per emptying of the bins: 2^30 of at most 2^53 (float64) in a 128-bit bin, or of at
// most 2^24 in a 64-bit one, summed over the lanes, stay far from overflow.
constexpr std::uint64_t kBlock = std::uint64_t(1) << 30;

template <class B>
using Signed = std::conditional_t<sizeof(B) == 16, __int128, long long>;

// Adds the bin value b (any sign) times 2^scale into the accumulator, 32 bits at a time (each
// piece is exactly a double).
void flush_bin(long long* w, long long b, int scale) {
  const auto u = static_cast<unsigned long long>(b);
  ex::add(w, static_cast<double>(u & 0xffffffffull), scale);
  ex::add(w, static_cast<double>(b >> 32), scale + 32);  // arithmetic shift (g++, clang)
}
void flush_bin(long long* w, __int128 b, int scale) {
  const auto u = static_cast<unsigned __int128>(b);
  ex::add(w, static_cast<double>(static_cast<unsigned long long>(u & 0xffffffffu)), scale);
  ex::add(w, static_cast<double>(static_cast<unsigned long long>((u >> 32) & 0xffffffffu)), scale + 32);
  ex::add(w, static_cast<double>(static_cast<long long>(b >> 64)), scale + 64);
}

// The binned sum of n elements of one IEEE binary format: Bits its encoding, kExp exponent bits,
// kFrac fraction bits (stored, without the implicit one), Bin an unsigned integer wide enough for
// 2^30 significands. An element's bin is its sign and exponent (its top bits): the significand
// M (the fraction with the implicit one, none for subnormals) adds in without a branch or a
// negation. NaN and infinity land in the all-ones exponent's two bins, which are looked at once
// per block of elements (rare: a block that has any is scanned again for which ones).
template <class Bits, int kExp, int kFrac, class Bin, int kLanes>
constexpr std::size_t bin_words() {
  return static_cast<std::size_t>(kLanes) * (std::size_t(2) << kExp) * sizeof(Bin) / sizeof(unsigned long long);
}

// bins: kLanes x 2^(kExp+1) Bins, zero (and left zero).
template <class Bits, int kExp, int kFrac, class Bin, int kLanes>
void add_binned(const unsigned char* p, std::uint64_t n, long long* w, unsigned& flags, Bin* bins) {
  constexpr int kBins = 2 << kExp;  // sign and exponent
  constexpr int kMaxExp = (1 << kExp) - 1;
  constexpr Bits kFracMask = static_cast<Bits>((Bits(1) << kFrac) - 1);
  constexpr Bits kExpMask = static_cast<Bits>(Bits(kMaxExp) << kFrac);
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  // Lanes: consecutive elements go to different copies of the bins, so that a run of elements of
  // one exponent does not wait on the previous add to the same bin.
  for (std::uint64_t done = 0; done < n;) {
    const std::uint64_t count = n - done < kBlock ? n - done : kBlock;
    const unsigned char* q = p + done * sizeof(Bits);
    std::uint64_t i = 0;
    for (; i + kLanes <= count; i += kLanes) {
      Bits b[kLanes];
      std::memcpy(b, q + i * sizeof(Bits), sizeof b);
      for (int l = 0; l < kLanes; ++l) {
        const Bin m = static_cast<Bin>(b[l] & kFracMask) | ((b[l] & kExpMask) != 0 ? Bin(1) << kFrac : Bin(0));
        bins[static_cast<std::size_t>(l) * kBins + (b[l] >> kFrac)] += m;
      }
    }
    for (; i < count; ++i) {
      Bits b;
      std::memcpy(&b, q + i * sizeof(Bits), sizeof b);
      bins[b >> kFrac] += static_cast<Bin>(b & kFracMask) | ((b & kExpMask) != 0 ? Bin(1) << kFrac : Bin(0));
    }
    Bin total[kBins] = {};
    for (int l = 0; l < kLanes; ++l)
      for (int k = 0; k < kBins; ++k) total[k] += bins[static_cast<std::size_t>(l) * kBins + k];
    if (total[kMaxExp] != 0 || total[kBins - 1] != 0) {  // NaN or infinity somewhere in the block
      for (std::uint64_t j = 0; j < count; ++j) {
        Bits b;
        std::memcpy(&b, q + j * sizeof(Bits), sizeof b);
        if ((b & kExpMask) != kExpMask) continue;
        flags |= (b & kFracMask) != 0 ? ex::kNaN : (b >> (sizeof(Bits) * 8 - 1)) != 0 ? ex::kNegInf : ex::kPosInf;
      }
    }
    // Exponent e's unit is 2^(e - bias - kFrac); subnormals (e = 0) share exponent 1's.
    for (int e = 0; e < kMaxExp; ++e) {
      const Bin pos = total[e], neg = total[(1 << kExp) + e];
      if (pos == neg) continue;
      const int scale = (e == 0 ? 1 : e) - kBias - kFrac;
      if (pos > neg) flush_bin(w, static_cast<Signed<Bin>>(pos - neg), scale);
      else flush_bin(w, -static_cast<Signed<Bin>>(neg - pos), scale);
    }
    ex::normalize(w);
    std::fill(bins, bins + static_cast<std::size_t>(kLanes) * kBins, Bin(0));
    done += count;
  }
}

}  // namespace

bool exact_sum_takes(dtype t) {
  return t == dtype::f16 || t == dtype::bf16 || t == dtype::f32 || t == dtype::f64;
}

exact_sum::exact_sum(dtype t) : t_(t), words_(ex::kWords, 0) {
  if (!exact_sum_takes(t))
    throw error(std::string("tally: internal error: the host's exact sum takes float16, bfloat16, float32 and "
                            "float64 elements, not ") + to_string(t));
  switch (t) {
    case dtype::f16: bins_.assign(bin_words<std::uint16_t, 5, 10, unsigned long long, 4>(), 0); break;
    case dtype::bf16: bins_.assign(bin_words<std::uint16_t, 8, 7, unsigned long long, 4>(), 0); break;
    case dtype::f32: bins_.assign(bin_words<std::uint32_t, 8, 23, unsigned long long, 4>(), 0); break;
    default: bins_.assign(bin_words<std::uint64_t, 11, 52, unsigned __int128, 2>(), 0); break;
  }
}

void exact_sum::add(const void* data, std::uint64_t n) {
  if (n == 0) return;
  const auto* p = static_cast<const unsigned char*>(data);
  long long* w = words_.data();
  // The bins live in the object (made once, zero between calls): 16 KiB for f32, 128 KiB for f64.
  auto* u64 = bins_.data();
  switch (t_) {
    case dtype::f16: add_binned<std::uint16_t, 5, 10, unsigned long long, 4>(p, n, w, flags_, u64); break;
    case dtype::bf16: add_binned<std::uint16_t, 8, 7, unsigned long long, 4>(p, n, w, flags_, u64); break;
    case dtype::f32: add_binned<std::uint32_t, 8, 23, unsigned long long, 4>(p, n, w, flags_, u64); break;
    default:
      add_binned<std::uint64_t, 11, 52, unsigned __int128, 2>(p, n, w, flags_, reinterpret_cast<unsigned __int128*>(u64));
      break;
  }
  count_ += n;
}

void exact_sum::merge(const exact_sum& o) {
  if (o.t_ != t_) throw error("tally: internal error: merging exact sums of different dtypes");
  for (int k = 0; k < ex::kWords; ++k) words_[k] += o.words_[k];
  ex::normalize(words_.data());
  flags_ |= o.flags_;
  count_ += o.count_;
}

}  // namespace tally::cpu
