// `tally reduce FILE.npy --axis K[,K+1...]`: an N-d array reduced along one axis, or several
// adjacent ones, by the segmented layer (tally::reduce_axis); the results are printed, or
// written with -o as a .npy of the remaining shape (argmin/argmax: int64 indices along the
// reduced axes, -1 where they are empty, as numpy's argmax gives them).
//
//   tally reduce x.npy --axis 1 -o row_sums.npy     # x of shape (3, 4, 5) -> (3, 5)
//   tally stats x.npy --axis -1 -o norms.npy        # -> (3, 4, 7): count sum min max mean var std
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/npy.hpp"
#include "tally/tally.hpp"

namespace tally::cli {

// The axes of a shape as reduce_axis takes them. Axes may be negative (from the end, as in
// numpy) and must be distinct and adjacent; a Fortran-order array is the C-order array of the
// reversed shape, so its axes are mirrored and its results are written in Fortran order.
struct axis_plan {
  std::vector<std::uint64_t> dims;       // memory-order dims handed to reduce_axis
  int axis = 0, count = 1;               // first reduced axis in `dims` and how many
  std::vector<std::uint64_t> out_shape;  // the array's shape without the reduced axes
  bool fortran = false;
  std::uint64_t results = 1;
};
// Throws tally::error naming the bad axis (out of range, repeated, not adjacent).
axis_plan plan_axes(const std::vector<std::uint64_t>& shape, bool fortran, const std::vector<int>& axes);

struct axis_output {
  std::string out_path;  // -o: a .npy of the results; else they are printed
  bool json = false;
  bool value_only = false;
};
// Reduces `a` (already checked: op supported for its dtype) along `axes` and prints or writes.
int reduce_along_axes(const io::loaded_array& a, const std::string& path, op o, const options& opt,
                      const std::vector<int>& axes, const axis_output& out);

// Statistics along `axes`: per remaining index count, sum, min, max, mean, variance and stddev
// (with ddof) printed, or written with -o as a float64 .npy of the remaining shape plus a last
// axis of those 7 fields, in that order.
int stats_along_axes(const io::loaded_array& a, const std::string& path, const options& opt, int ddof,
                     const std::vector<int>& axes, const axis_output& out);

}  // namespace tally::cli
