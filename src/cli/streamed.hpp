// Whole-array `tally reduce`, `stats` and `dot` of files, streamed: the file is read in pieces by
// the reducer's worker threads straight into its pinned staging (tally::reducer::feed_from), so
// files larger than host or GPU memory reduce, reads, copies and kernels overlap, and a progress
// line shows on stderr once a run lasts a couple of seconds.
//
//   io::array_file f = open_array("x.npy", "");   // the header only
//   tally::value v = reduce_file(f, tally::op::sum, {});
#pragma once

#include <string>

#include "io/npy.hpp"
#include "tally/tally.hpp"

namespace tally::cli {

bool is_npy_path(const std::string& path);  // ends in .npy (any case), or starts with numpy's magic

// A .npy file (its dtype from the header; a --dtype that contradicts it is an error) or a raw file
// of --dtype elements, opened for streaming. Directories, FIFOs and unreadable files say so.
io::array_file open_array(const std::string& path, const std::string& dtype_name);

value reduce_file(const io::array_file& f, op o, const options& opt);
stats stats_file(const io::array_file& f, const options& opt);
value dot_files(const io::array_file& x, const io::array_file& y, const options& opt);

}  // namespace tally::cli
