#include <algorithm>

#include "lab/lab.hpp"

namespace tally::lab {
namespace {
std::vector<registration>& storage() {
  static std::vector<registration> r;
  return r;
}
int group_rank(const std::string& g) {
  const auto o = group_order();
  const auto it = std::find(o.begin(), o.end(), g);
  return static_cast<int>(it - o.begin());
}
}  // namespace

registrar::registrar(variant_meta meta, factory make) {
  storage().push_back({std::move(meta), make});
}

const std::vector<registration>& registry() {
  static const std::vector<registration> sorted = [] {
    auto r = storage();
    std::stable_sort(r.begin(), r.end(), [](const registration& a, const registration& b) {
      const int ga = group_rank(a.meta.group), gb = group_rank(b.meta.group);
      return ga != gb ? ga < gb : a.meta.order < b.meta.order;
    });
    return r;
  }();
  return sorted;
}

const registration* find(const std::string& id) {
  for (const auto& r : registry())
    if (r.meta.id == id) return &r;
  return nullptr;
}

std::vector<std::string> group_order() { return {"cuda", "hip", "optlog", "sycl", "numba", "anchor"}; }

std::string group_title(const std::string& g) {
  if (g == "cuda") return "CUDA tutorial: reductions 1-5 and the two steps after";
  if (g == "hip") return "HIP training examples";
  if (g == "optlog") return "Block-level optimisation log";
  if (g == "sycl") return "SYCL lecture";
  if (g == "numba") return "Numba chapter: dot product";
  if (g == "anchor") return "Anchors: CUB, single-pass, tally";
  return g;
}

}  // namespace tally::lab
