#!/usr/bin/env bash
# Nsight Compute profiles of tally's kernels on the GPU machine, for when a kernel is slower than
# its instruction count says: scripts/profile.sh OUTDIR [case ...]
# cases: exact-f32-small, exact-f32-large (2^26), exact-f32-huge (2^28), stats-f32-mid (default:
# all but huge and tiny); tiny (the small-size cost: sum, stats and exact at 2^10 and 2^16, f32 and
# f64). Each profiles the first launch of the kernel behind `tally reduce/stats` on random data
# (speed of light, compute workload, warp states, instruction mix) into OUTDIR/ncu-<case>.txt;
# tiny profiles the 40th launch inside `tally bench numerics` (the code and data warm, as in the
# benchmark's loops). Clocks are left alone.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/profile.sh OUTDIR [case...]}
shift
mkdir -p "$out"
cases=${*:-exact-f32-small exact-f32-large stats-f32-mid}
bin=build/dev/tally
data=/tmp/tally-profile
mkdir -p "$data"
make_f32() { python3 -c "import numpy as np; np.random.default_rng(1).uniform(-1,1,2**$1).astype(np.float32).tofile('$data/f32-$1.bin')"; }
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --section Occupancy --section SourceCounters)
run() {  # name, kernel regex, tally arguments...
  local name=$1 regex=$2; shift 2
  ncu --clock-control none "${sections[@]}" -k "regex:$regex" --launch-count 1 "$bin" "$@" >"$out/ncu-$name.txt" 2>&1
  echo "$name: rc=$? $(grep -E 'Duration|Memory Throughput|Compute \(SM\) Throughput' "$out/ncu-$name.txt" | tr -s ' ' | head -3 | tr '\n' ';')"
}
# PROFILE_SOURCE=1: also each instruction's SASS with its warp-stall samples (every 32 cycles)
# in OUTDIR/sass-<case>.csv.
warm() {  # name, mangled-name regex, bench numerics arguments...
  local name=$1 regex=$2; shift 2
  ncu --clock-control none --cache-control none --kernel-name-base mangled "${sections[@]}" -k "regex:$regex" \
    --warp-sampling-interval 0 --launch-skip 40 --launch-count 1 -f -o "$out/$name" \
    "$bin" bench numerics --quick "$@" >"$out/log-$name.txt" 2>&1 || tail -5 "$out/log-$name.txt" >&2
  ncu -i "$out/$name.ncu-rep" --print-details all >"$out/ncu-$name.txt" 2>&1 || cat "$out/ncu-$name.txt" >&2
  [ -n "${PROFILE_SOURCE:-}" ] && ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass >"$out/sass-$name.csv" 2>&1
  rm -f "$out/$name.ncu-rep"
  echo "$name: rc=$? $(grep -E 'Duration|Elapsed Cycles|Executed Instructions  ' "$out/ncu-$name.txt" | tr -s ' ' | head -3 | tr '\n' ';')"
}
for c in $cases; do
  case $c in
    exact-f32-small) make_f32 14; run "$c" exact_kernel reduce "$data/f32-14.bin" --dtype f32 --mode exact --value-only ;;
    exact-f32-large) make_f32 26; run "$c" exact_kernel reduce "$data/f32-26.bin" --dtype f32 --mode exact --value-only ;;
    exact-f32-huge) make_f32 28; run "$c" exact_kernel reduce "$data/f32-28.bin" --dtype f32 --mode exact --value-only ;;
    stats-f32-mid) make_f32 20; run "$c" reduce_kernel stats "$data/f32-20.bin" --dtype f32 ;;
    tiny)
      for n in ${PROFILE_SIZES:-10 16}; do
        warm "sum-f32-$n" 'reduce_kernelIfNS0_6op_sumIf' --tables accuracy --sizes 2^$n
        warm "exact-f32-$n" 'exact_kernelIfNS0_8op_exactIfLNS0_10exact_formE0' --tables accuracy --sizes 2^$n
        warm "exact-f64-$n" 'exact_kernelIdNS0_8op_exactIdLNS0_10exact_formE0' --tables accuracy --sizes 2^$n
        warm "stats-f32-$n" 'op_statsIfLb0' --tables stats --sizes 2^$n
        warm "stats-f64-$n" 'op_statsIdLb0' --tables stats --sizes 2^$n
      done ;;
    *) echo "unknown case $c" ;;
  esac
done
