// The segmented layer's kernels: rowtile and group (short contiguous segments), split (long
// contiguous segments, a block or several per segment), thin and columns (inner > 1: a thread per
// vector of results, or tiles with lanes along the axis), ragged spans (a warp's window of shared
// memory), ragged chunks and fix-up, ragged pieces (few segments, one launch), ragged tiles (a
// sweep candidate), ragged stripes (a warp a stripe), ragged segments in one cooperative launch
// (the check, tiles and fix-up: once), exact_block. Every op is a
// core op struct (src/core/ops.cuh): the same identity, transform, fold, combine and finalize
// as the 1-D reduce, so each segment's result follows the same rules (NaN, ties, modes).
//
//   seg_group_kernel<float, op_sum<float>>: rows {1 2 3 4 | 5 6 7 8}, group 1 -> {10, 26}
//
// One file a kernel family, in kernels/: common (arguments, workspace, cp.async, the warps'
// segmented scan), groups, rowtile, split (and exact_block), columns (thin and tiles), spans,
// chunks (and the fix-up), pieces, tiles, stripes, check (the offset check's body), once.
#pragma once

#include "kernels/common.cuh"
#include "kernels/groups.cuh"
#include "kernels/rowtile.cuh"
#include "kernels/split.cuh"
#include "kernels/columns.cuh"
#include "kernels/spans.cuh"
#include "kernels/chunks.cuh"
#include "kernels/pieces.cuh"
#include "kernels/tiles.cuh"
#include "kernels/stripes.cuh"
#include "kernels/once.cuh"
