#!/usr/bin/env bash
# The whole GPU check in one command, for the GPU machine:
#   scripts/gpu-check.sh OUTDIR [stages...]
# stages (default: build test sanitize bench numerics): build, test (full GoogleTest suite and the
# check of `tally reduce/stats/dot` against numpy), sanitize
# (compute-sanitizer memcheck/racecheck/synccheck/initcheck on the tests at small sizes), bench
# (tally info + tally bench core), numerics (tally bench numerics: argmin/argmax vs CUB, dot vs
# cuBLAS, accuracy modes, stats, f16/bf16; about 2 minutes), segmented (tally bench segmented), segprof
# (one segmented plan under ncu: TALLY_PROFILE_PLAN / _FORM / _TOTAL / _SHAPE / _SECTIONS; TALLY_PROFILE_SASS=1
# adds each instruction's warp-stall samples, summed by scripts/sass-stalls.py into segprof-stalls.md), host
# (tally bench host, tally bench cpu and scripts/host-file-check.py: host memory and files end to end), python
# (scripts/python-bench.py: tally.sum vs torch and cupy), pytest (the Python tests alone; the test
# stage runs them too), calls (tally bench calls: the host cost of one small call and of the
# driver queries behind the memory checks, and a blocking call's round trip), lab (tally lab run), sweep (tally lab sweep), tune
# (tally bench tune --measure: the policy's choice and the shape sweeps), layout
# (tally_layout_probe: the 1-D sum's layouts against CUB; TALLY_PROBE_SIZES; and tally_rows_probe: row
# sums against CUB's segmented reduce; TALLY_ROWS_PROBE_SHAPES; and tally_columns_probe: column sums
# against CUB's rows of the transposed layout; TALLY_COLUMNS_PROBE_SHAPES), schedules (bench core and
# the argmax/dot tables of bench numerics twice, --schedule strided and --schedule dynamic: whether
# a GPU's measured entry should turn the dynamic schedule on), dist (the sharded reductions:
# Dist* tests, tally_dist_mpi_check under mpirun on every GPU, `tally reduce --ranks` of files against
# one GPU, and `tally bench dist`; TALLY_DIST_BENCH_ARGS, e.g. "--quick --totals 20,24"; TALLY_DIST_RANKS,
# e.g. "2 4": those process counts one after the other, bench-dist-npN.md each), ragged (the ragged
# segments: Segmented* tests, compute-sanitizer on the ragged tests, the ragged sweeps and the table
# against CUB), columns (the column tiles: their tests, memcheck on them, the column sweep of every
# candidate and torch / cupy on the same shapes; TALLY_COLUMN_TOTALS). Logs and JSON land in OUTDIR; TALLY_PACK=1 packs them into OUTDIR/all.tgz (beside
# summary.txt). TALLY_TEST_FILTER narrows the test stage (a gtest filter).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-check.sh OUTDIR [stages...]}
shift
mkdir -p "$out"
stages=${*:-build test sanitize bench numerics}
export PATH="/usr/local/cuda/bin:$PATH"
status=0
has() { [[ " $stages " == *" $1 "* ]]; }
step() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$out/summary.txt"; }
bin=build/dev

if has build; then
  step build
  { nvidia-smi; TALLY_SKIP_SETUP=1 TALLY_JOBS=$(nproc) bash scripts/build.sh dev; } >"$out/build.log" 2>&1 \
    || { status=1; tail -40 "$out/build.log"; }
fi
if has test; then
  step test
  timeout "${TALLY_TEST_TIMEOUT:-900}" "$bin/tally_tests" --gtest_brief=1 \
    ${TALLY_TEST_FILTER:+--gtest_filter="$TALLY_TEST_FILTER"} >"$out/tests.log" 2>&1 || status=1
  "$bin/tally_plain_cxx" >>"$out/tests.log" 2>&1 || status=1
  tail -5 "$out/tests.log" | tee -a "$out/summary.txt"
  grep -E "FAILED|Failure" "$out/tests.log" | head -20
fi
if has test; then
  step "package: install, then build and run tests/consumer against it (a reduction on this GPU)"
  cmake -DBUILD_DIR="$bin" -DSOURCE_DIR="$PWD" -DWORK=/tmp/tally-consumer-check -P scripts/consumer-check.cmake \
    >>"$out/tests.log" 2>&1 && grep -h "sum of 1000" "$out/tests.log" | tail -1 | tee -a "$out/summary.txt" \
    || { status=1; echo "package check failed" | tee -a "$out/summary.txt"; }
fi
if has test || has pytest; then
  step "python: the package's CPU and GPU tests (torch, cupy, numba, JAX, numpy inputs vs numpy; the README example)"
  # Both suites run whatever the first gives (a CPU-side failure once hid the GPU tests' state).
  PYTHONPATH="$bin/python" python3 -m pytest -q -p no:cacheprovider python/tests/test_cpu.py \
    >"$out/python.log" 2>&1 || status=1
  tail -1 "$out/python.log" | sed 's/^/CPU-side: /' | tee -a "$out/summary.txt"
  PYTHONPATH="$bin/python" python3 python/tests/run_gpu.py >>"$out/python.log" 2>&1 || status=1
  tail -1 "$out/python.log" | sed 's/^/GPU: /' | tee -a "$out/summary.txt"
fi
if has test; then
  step "cli: tally reduce, stats and dot against numpy"
  # 1 MiB staging chunks: every file of a few MiB crosses chunk boundaries (src/chunked). One GPU
  # visible: each of its ~100 commands starts CUDA, which took 3.4x as long on a four-GPU host
  # (364 s against 106 s on one GPU, 2026-11-26).
  CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} TALLY_CHUNK_MIB=1 python3 scripts/cli-check.py "$bin/tally" /tmp/tally-cli-check \
    >>"$out/tests.log" 2>&1 || status=1
  tail -1 "$out/tests.log" | tee -a "$out/summary.txt"
fi
if has dist; then
  # The sharded reductions: the suite's Dist* tests (a communicator of every GPU of this process),
  # then one process per GPU under MPI (NVLink multicast off: KINDS.md of the device tool).
  step "dist: sharded reductions (NCCL), one process and one process per GPU"
  "$bin/tally_tests" --gtest_brief=1 --gtest_filter='Dist*' >"$out/dist.log" 2>&1 || status=1
  tail -3 "$out/dist.log" | tee -a "$out/summary.txt"
  all_gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  # TALLY_DIST_RANKS: the process counts to run (e.g. "4 2" on four GPUs); every GPU by default.
  for gpus in ${TALLY_DIST_RANKS:-$all_gpus}; do
  sfx=""; [ -n "${TALLY_DIST_RANKS:-}" ] && sfx="-np$gpus"
  if [ "$gpus" -ge 2 ] && [ "$gpus" -le "$all_gpus" ] && [ -x "$bin/tally_dist_mpi_check" ]; then
    # Each rank free to use every core (TALLY_MPI_BIND to change): OpenMPI binds a rank to one core
    # by default when there are two, where NCCL's proxy thread and the waiting thread then share it.
    mpi="mpirun --allow-run-as-root --oversubscribe --bind-to ${TALLY_MPI_BIND:-none} -np $gpus -x NCCL_NVLS_ENABLE"
    # The checks with each exchange of the blocking calls: through NCCL's device API (the default,
    # dist_options::device_exchange; the check fails where it is not in use), then NCCL's all-gather.
    for how in device allgather; do
      echo "-- exchange: $how" >>"$out/dist.log"
      NCCL_NVLS_ENABLE=0 timeout 300 $mpi "$bin/tally_dist_mpi_check" "${TALLY_DIST_LOG2N:-24}" $how >>"$out/dist.log" 2>&1 || status=1
      tail -1 "$out/dist.log" | sed "s/^/exchange $how: /" | tee -a "$out/summary.txt"
    done
    # A file reduced across the ranks (each rank reads its slice) against one GPU's reduce of it.
    python3 -c "import numpy as np; r = np.random.default_rng(7); np.save('/tmp/tally-dist.npy', r.standard_normal((1 << 24) + 5).astype(np.float32)); np.save('/tmp/tally-dist-i.npy', r.integers(-9, 9, (1 << 22) + 3).astype(np.int32))"
    for args in "/tmp/tally-dist.npy --mode exact" "/tmp/tally-dist.npy --op max" "/tmp/tally-dist-i.npy --op argmax" "/tmp/tally-dist-i.npy --op sum"; do
      one=$("$bin/tally" reduce $args --value-only 2>&1)
      many=$(NCCL_NVLS_ENABLE=0 timeout 120 $mpi "$bin/tally" reduce $args --value-only --ranks 2>>"$out/dist.log")
      if [ "$one" = "$many" ]; then echo "reduce $args --ranks: $many (as one GPU)"; else echo "reduce $args --ranks: FAIL '$many' vs one GPU '$one'"; status=1; fi
    done >"$out/dist-files.log" 2>&1
    tee -a "$out/dist.log" "$out/summary.txt" <"$out/dist-files.log"
    grep -q FAIL "$out/dist-files.log" && status=1
    step "bench dist: one GPU vs $gpus, tally::dist vs CUB per shard + ncclAllReduce"
    NCCL_NVLS_ENABLE=0 timeout 400 $mpi "$bin/tally" bench dist ${TALLY_DIST_BENCH_ARGS:-} --md "$out/bench-dist$sfx.md" \
      --json "$out/bench-dist$sfx.json" >"$out/bench-dist$sfx.log" 2>&1 || { status=1; tail -20 "$out/bench-dist$sfx.log"; }
    grep -B2 -A24 "latency:" "$out/bench-dist$sfx.md" | tee -a "$out/summary.txt"
    # The stream-ordered form (reduce_async, a captured graph) in a run of its own, after the
    # main one's results are saved.
    step "bench dist --async: blocking vs reduce_async vs graph replay, $gpus ranks"
    NCCL_NVLS_ENABLE=0 timeout 300 $mpi "$bin/tally" bench dist --async --quick --totals ${TALLY_DIST_ASYNC_TOTALS:-20,24,28,30} \
      --md "$out/bench-dist-async$sfx.md" --json "$out/bench-dist-async$sfx.json" >"$out/bench-dist-async$sfx.log" 2>&1 \
      || { status=1; tail -20 "$out/bench-dist-async$sfx.log"; }
    grep -A8 "stream-ordered" "$out/bench-dist-async$sfx.md" | tee -a "$out/summary.txt"
  else
    echo "dist: $gpus of $all_gpus GPU(s): the one-process-per-GPU check needs two or more (nvidia-h200-x2)" | tee -a "$out/summary.txt"
  fi
  done
  if [ "$all_gpus" -ge 2 ]; then
    step "bench dist --single-process: one process driving all $all_gpus GPUs (init_all)"
    NCCL_NVLS_ENABLE=0 timeout 300 "$bin/tally" bench dist --single-process ${TALLY_DIST_BENCH_ARGS:-} \
      --md "$out/bench-dist-single.md" --json "$out/bench-dist-single.json" >"$out/bench-dist-single.log" 2>&1 \
      || { status=1; tail -20 "$out/bench-dist-single.log"; }
    grep -A14 "one process driving" "$out/bench-dist-single.md" | tee -a "$out/summary.txt"
  fi
fi
if has sanitize; then
  # The lab's deliberately wrong variants race by design (hip-3, hip-4: every thread of a block
  # writes one slot; numba-1: unguarded read-modify-write; numba-3 reproduces a printed bug):
  # they are excluded by name, and the sanitizer runs on every other test.
  racy="*hip_3*:*hip_4*:*numba_1*:*numba_3*:LabGpuDemo.*"
  # The Dist* tests run apart, without API-error reports: NCCL's communicator set-up asks
  # cudaFuncGetAttributes of kernels it has no image of for this GPU and handles the error itself
  # (28 reports from inside libnccl's ncclGroupEnd on the H100, 2026-11-26); tally's own CUDA
  # calls are checked by tally and throw, and the kernels are still checked. (With
  # TALLY_SANITIZE_FILTER set, that one run takes the filter, API-error reports on.)
  # Racecheck takes longest (the span kernels' shared-memory windows: past 240 s on the H100,
  # 2026-11-27): 480 s, the others 240 (TALLY_SANITIZE_TIMEOUT overrides both); with the rest of
  # the stage that is past one 600 s device call, so TALLY_SANITIZE_TOOLS=racecheck goes alone.
  for tool in ${TALLY_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
    step "compute-sanitizer --tool $tool"
    limit=${TALLY_SANITIZE_TIMEOUT:-$([ "$tool" = racecheck ] && echo 480 || echo 240)}
    TALLY_TEST_SMALL=1 TALLY_UNDER_SANITIZER=1 timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bin/tally_tests" --gtest_brief=1 --gtest_filter="${TALLY_SANITIZE_FILTER:-*Gpu*:-LargeGpu.*:Dist*:$racy}" \
      >"$out/sanitize-$tool.txt" 2>&1
    rc=$?
    if [ -z "${TALLY_SANITIZE_FILTER:-}" ]; then
      TALLY_TEST_SMALL=1 TALLY_UNDER_SANITIZER=1 timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        --report-api-errors no "$bin/tally_tests" --gtest_brief=1 --gtest_filter='DistGpu*' \
        >>"$out/sanitize-$tool.txt" 2>&1 || rc=$((rc > 0 ? rc : 9))
    fi
    echo "$tool rc=$rc $(grep -E 'SUMMARY' "$out/sanitize-$tool.txt" | tail -2 | tr '\n' ' ')" | tee -a "$out/summary.txt"
    [ $rc = 0 ] || status=1
  done
  cat "$out"/sanitize-*.txt >"$out/sanitize.log"; rm -f "$out"/sanitize-*.txt
fi
if has bench; then
  step bench
  "$bin/tally" info | tee -a "$out/summary.txt"
  "$bin/tally" bench core ${TALLY_BENCH_ARGS:-} --json "$out/bench-core.json" --md "$out/bench-core.md" \
    >/dev/null 2>>"$out/progress.log" || status=1
  tail -3 "$out/progress.log"
fi
if has numerics; then
  step "bench numerics"
  timeout "${TALLY_NUMERICS_TIMEOUT:-420}" "$bin/tally" bench numerics ${TALLY_NUMERICS_ARGS:-} \
    --json "$out/bench-numerics.json" --md "$out/bench-numerics.md" >/dev/null 2>>"$out/progress.log" || status=1
  tail -2 "$out/progress.log"
  # The requirements at 2^28 (PASS/FAIL per row) into the summary; a wrong result fails the check.
  grep -E "PASS|FAIL" "$out/bench-numerics.md" 2>/dev/null | tee -a "$out/summary.txt"
  if grep -q MISMATCH "$out/bench-numerics.md" 2>/dev/null; then
    grep MISMATCH "$out/bench-numerics.md" | tee -a "$out/summary.txt"
    status=1
  fi
fi
if has segmented; then
  step "bench segmented"
  "$bin/tally" bench segmented ${TALLY_SEGMENTED_ARGS:-} --json "$out/bench-segmented.json" --md "$out/bench-segmented.md" \
    >/dev/null 2>>"$out/progress.log" || status=1
  tail -2 "$out/progress.log"
  grep -c MISMATCH "$out/bench-segmented.md" 2>/dev/null | grep -qv '^0$' && { echo "segmented: MISMATCH" | tee -a "$out/summary.txt"; status=1; }
fi
if has ragged; then
  # The ragged segments' check: their GPU tests, compute-sanitizer on the span, stripe, one-launch and
  # lane-group tests (small sizes; TALLY_RAGGED_SANITIZE_TOOLS, default "memcheck racecheck
  # synccheck", empty for none; each cut at TALLY_SANITIZE_TIMEOUT, default 300 s), the ragged
  # sweeps (both tails; TALLY_RAGGED_TOTALS, default 24,26,28) and the table against CUB
  # (TALLY_RAGGED_BENCH_TOTALS, default 24,28). H100, 2026-11-27: build 150-170 s, tests 40 s,
  # memcheck about 60 s, racecheck over 200 s, the 2^24 / 2^28 sweeps and table about 200 s: with
  # the build, all of it passes one 600 s device call, so racecheck goes in a call of its own.
  step "ragged: Segmented* tests, sanitizers on the ragged tests, sweeps, bench vs CUB"
  "$bin/tally_tests" --gtest_brief=1 --gtest_filter='Segmented*' >"$out/ragged-tests.log" 2>&1 || status=1
  tail -1 "$out/ragged-tests.log" | tee -a "$out/summary.txt"
  grep -E "FAILED|Failure" -A4 "$out/ragged-tests.log" | head -30
  for tool in ${TALLY_RAGGED_SANITIZE_TOOLS-memcheck racecheck synccheck}; do
    TALLY_TEST_SMALL=1 TALLY_UNDER_SANITIZER=1 timeout "${TALLY_SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bin/tally_tests" --gtest_brief=1 \
      --gtest_filter='SegmentedGpu.RaggedSpans*:SegmentedGpu.RaggedStripes*:SegmentedGpu.RaggedOneLaunch*:SegmentedGpu.Span*:SegmentedGpu.EveryRagged*:SegmentedGpu.Eager*' \
      >"$out/ragged-sanitize-$tool.log" 2>&1 || status=1
    echo "$tool $(grep -E 'SUMMARY' "$out/ragged-sanitize-$tool.log" | tail -1)" | tee -a "$out/summary.txt"
  done
  "$bin/tally" bench segmented --totals "${TALLY_RAGGED_TOTALS:-24,26,28}" --sweep-only --sweep-forms ragged,ragged-uniform \
    --md "$out/ragged-sweep.md" >/dev/null 2>>"$out/progress.log" || status=1
  tail -1 "$out/progress.log"
  "$bin/tally" bench segmented --totals "${TALLY_RAGGED_BENCH_TOTALS:-24,28}" --md "$out/ragged-bench.md" \
    --json "$out/ragged-bench.json" >/dev/null 2>>"$out/progress.log" || status=1
  grep -A12 "ragged segments (Pareto lengths, a fifth empty): tally vs CUB" "$out/ragged-bench.md" | tee -a "$out/summary.txt"
fi
if has columns; then
  # The column tiles' check: their GPU tests (the `r` twins and the lean kernel bitwise against the
  # columns kernel's plans), memcheck on those at small sizes, the column sweep (TALLY_COLUMN_TOTALS,
  # default 20,24,28: every candidate against the rule, `r` and `lean` twins included) and torch /
  # cupy on the same shapes.
  step "columns: column tests, memcheck, the column sweep, torch and cupy"
  "$bin/tally_tests" --gtest_brief=1 --gtest_filter='Segmented*Column*:SegmentedGpu.Thin*' >"$out/columns-tests.log" 2>&1 \
    || status=1
  tail -1 "$out/columns-tests.log" | tee -a "$out/summary.txt"
  grep -E "FAILED|Failure" -A4 "$out/columns-tests.log" | head -30
  TALLY_TEST_SMALL=1 TALLY_UNDER_SANITIZER=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bin/tally_tests" --gtest_brief=1 --gtest_filter='SegmentedGpu.ColumnRing*:SegmentedGpu.EveryColumnCandidate*:SegmentedGpu.LeanColumn*' \
    >"$out/columns-memcheck.log" 2>&1 || status=1
  echo "memcheck $(grep -E 'SUMMARY' "$out/columns-memcheck.log" | tail -1)" | tee -a "$out/summary.txt"
  "$bin/tally" bench segmented --totals "${TALLY_COLUMN_TOTALS:-20,24,28}" --sweep-only --sweep-forms columns \
    --md "$out/columns-sweep.md" >/dev/null 2>>"$out/progress.log" || { status=1; tail -5 "$out/progress.log"; }
  grep -E "<- rule" "$out/columns-sweep.md" | tee -a "$out/summary.txt"
  python3 scripts/seg_compare.py --totals "${TALLY_COLUMN_TOTALS:-20,24,28}" --md "$out/seg-compare.md" \
    >"$out/seg-compare.log" 2>&1 || status=1
  tail -3 "$out/seg-compare.log"
fi
if has segprof; then
  # One segmented plan under Nsight Compute: TALLY_PROFILE_PLAN (a sweep label, "ragged g2 k64", or
  # "rule"), TALLY_PROFILE_FORM (ragged, ragged-uniform, rows, columns), TALLY_PROFILE_TOTAL (log2),
  # TALLY_PROFILE_SHAPE ("2^22 x 2^6"); TALLY_PROFILE_SECTIONS (ncu's --section list).
  step "ncu: segmented plan '${TALLY_PROFILE_PLAN:-rule}' at ${TALLY_PROFILE_FORM:-ragged} 2^${TALLY_PROFILE_TOTAL:-28} ${TALLY_PROFILE_SHAPE:-}"
  sections=""
  for sec in ${TALLY_PROFILE_SECTIONS:-SpeedOfLight Occupancy WarpStateStats SchedulerStats InstructionStats}; do sections="$sections --section $sec"; done
  timeout 400 ncu --profile-from-start off $sections -k 'regex:seg_' "$bin/tally" bench segmented --sweep-only \
    --sweep-forms "${TALLY_PROFILE_FORM:-ragged}" --totals "${TALLY_PROFILE_TOTAL:-28}" --profile-plan "${TALLY_PROFILE_PLAN:-rule}" \
    ${TALLY_PROFILE_SHAPE:+--profile-shapes "$TALLY_PROFILE_SHAPE"} --profile-reps 1 --md "$out/segprof.md" \
    >"$out/segprof.log" 2>&1 || status=1
  grep -E "seg_[a-z_]+kernel|Duration|DRAM Throughput|Issued Ipc|No Eligible|Stall|Warp Cycles Per Issued" "$out/segprof.log" \
    | head -60 | tee -a "$out/summary.txt"
  if [ -n "${TALLY_PROFILE_SASS:-}" ] && [ "${TALLY_PROFILE_SASS}" != 0 ]; then
    # Where the warps wait, instruction by instruction (real clocks: --clock-control none): the
    # SASS with its warp-state samples in segprof-sass.csv, summed by scripts/sass-stalls.py.
    timeout 400 ncu --clock-control none --profile-from-start off --section SourceCounters -k 'regex:seg_' -f \
      -o "$out/segprof-src" "$bin/tally" bench segmented --sweep-only --sweep-forms "${TALLY_PROFILE_FORM:-ragged}" \
      --totals "${TALLY_PROFILE_TOTAL:-28}" --profile-plan "${TALLY_PROFILE_PLAN:-rule}" \
      ${TALLY_PROFILE_SHAPE:+--profile-shapes "$TALLY_PROFILE_SHAPE"} --profile-reps 1 >>"$out/segprof.log" 2>&1 || status=1
    # The report stays where the export or the summary fails (the evidence).
    if ncu -i "$out/segprof-src.ncu-rep" --page source --csv --print-source sass >"$out/segprof-sass.csv" 2>>"$out/segprof.log" \
      && python3 scripts/sass-stalls.py "$out/segprof-sass.csv" --md >"$out/segprof-stalls.md"; then
      rm -f "$out/segprof-src.ncu-rep"
      grep -E "^####|^\| long_sb|^\| wait" "$out/segprof-stalls.md" | head -12 | tee -a "$out/summary.txt"
    else
      status=1
    fi
  fi
fi
if has host; then
  step "bench host: host memory end to end (staged, in place, cudaMemcpy + reduce)"
  "$bin/tally" bench host ${TALLY_HOST_ARGS:-} --json "$out/bench-host.json" --md "$out/bench-host.md" \
    >/dev/null 2>>"$out/progress.log" || status=1
  grep -E "exact_same_bits|host_share_same_bits" "$out/bench-host.md" | tee -a "$out/summary.txt"
  grep -q "exact_same_bits_as_device: yes" "$out/bench-host.md" || status=1
  grep -q "host_share_same_bits_as_device_exact: NO" "$out/bench-host.md" && status=1
  step "bench cpu: the host's exact sum (the head start's share) on 1 .. all cores"
  "$bin/tally" bench cpu --json "$out/bench-cpu.json" --md "$out/bench-cpu.md" >/dev/null 2>>"$out/progress.log" || status=1
  grep -E "same_bits" "$out/bench-cpu.md" | tee -a "$out/summary.txt"
  step "files: a 2^31 f32 .npy from the page cache, a sparse 100 GiB raw file"
  python3 scripts/host-file-check.py "$bin/tally" /tmp/tally-host-files ${TALLY_HOST_FILE_ARGS:-} \
    >"$out/host-files.log" 2>&1 || status=1
  tail -4 "$out/host-files.log" | tee -a "$out/summary.txt"
fi
if has python; then
  step "python bench: tally.sum vs torch / cupy, the Python layer's cost, rows and columns vs torch"
  PYTHONPATH="$bin/python" python3 scripts/python-bench.py --json "$out/python-bench.json" \
    >"$out/python-bench.md" 2>>"$out/progress.log" || status=1
  tail -3 "$out/python-bench.md"
fi
if has calls; then
  step "bench calls: one small call's host cost, step by step"
  "$bin/tally" bench calls --json "$out/bench-calls.json" --md "$out/bench-calls.md" >/dev/null 2>>"$out/progress.log" \
    || status=1
  cat "$out/bench-calls.md"
fi
if has lab; then
  step "lab run"
  "$bin/tally" lab run ${TALLY_LAB_ARGS:-} --json "$out/lab-run.json" --md "$out/lab-run.md" >/dev/null \
    2>>"$out/progress.log" || status=1
  tail -2 "$out/progress.log"
fi
if has sweep; then
  step "lab sweep"
  timeout "${TALLY_SWEEP_TIMEOUT:-900}" "$bin/tally" lab sweep ${TALLY_SWEEP_ARGS:-} --json "$out/lab-sweep.json" \
    >/dev/null 2>>"$out/progress.log" || status=1
  tail -2 "$out/progress.log"
fi
if has tune; then
  step "bench tune --measure"
  "$bin/tally" bench tune --measure ${TALLY_TUNE_ARGS:-} --json "$out/tune.json" --md "$out/tune.md" >/dev/null \
    2>>"$out/progress.log" || status=1
  tail -3 "$out/progress.log"
fi
if has layout; then
  # The 1-D sum's layouts side by side on one plain kernel body (strided, chunks, the dynamic
  # schedule, CUB's even share) against CUB: which layout a GPU's measured entry should take.
  step "layout probe: tally_layout_probe ${TALLY_PROBE_SIZES:-28 30 31}"
  "$bin/tally_layout_probe" ${TALLY_PROBE_SIZES:-28 30 31} >"$out/layout-probe.txt" 2>&1 || status=1
  grep -E "^2\^|CUB Device|dyn 512x16 \(|serial combine|strided 512x4|even 512x8, 5" "$out/layout-probe.txt" | tee -a "$out/summary.txt"
  # Row sums the same way (a block a row at 4 to 16 blocks an SM, arrangements, rings) against
  # CUB's segmented reduce: what the lean split kernel needs; and short rows (2^24 x 16: row tiles
  # with their results written or not, resident or flat grids; TALLY_ROWS_PROBE_SHAPES: log2 rows
  # and log2 cols, pairs).
  step "rows probe: tally_rows_probe ${TALLY_ROWS_PROBE_SHAPES:-12 12 14 12 10 14 24 4}"
  "$bin/tally_rows_probe" ${TALLY_ROWS_PROBE_SHAPES:-12 12 14 12 10 14 24 4} >"$out/rows-probe.txt" 2>&1 || status=1
  grep -E "^2\^|CUB Device|row 256x4, 8/SM|held to 4|tile \[|tile no-store|a block each \[|tally rowtile" "$out/rows-probe.txt" | tee -a "$out/summary.txt"
  # Column sums (tile widths, shares of the axis, loads in flight, blocks an SM) against CUB's
  # rows of the transposed layout (TALLY_COLUMNS_PROBE_SHAPES: log2 rows and log2 cols, pairs).
  step "columns probe: tally_columns_probe ${TALLY_COLUMNS_PROBE_SHAPES:-12 12 16 4 12 8 8 12}"
  "$bin/tally_columns_probe" ${TALLY_COLUMNS_PROBE_SHAPES:-12 12 16 4 12 8 8 12} >"$out/columns-probe.txt" 2>&1 ||
    status=1
  grep -E "^2\^|CUB Device" "$out/columns-probe.txt" | tee -a "$out/summary.txt"
fi
if has schedules; then
  step "schedules: the one-pass ops on the strided grid and on the dynamic schedule, one after the other"
  for sched in strided dynamic; do
    "$bin/tally" bench core --no-cold --schedule "$sched" --json "$out/bench-core-$sched.json" \
      --md "$out/bench-core-$sched.md" >/dev/null 2>>"$out/progress.log" || status=1
    "$bin/tally" bench numerics --tables argminmax,dot --sizes 2^24,2^26,2^28,2^30 --schedule "$sched" \
      --json "$out/bench-numerics-$sched.json" --md "$out/bench-numerics-$sched.md" >/dev/null \
      2>>"$out/progress.log" || status=1
    tail -1 "$out/progress.log"
  done
  python3 scripts/compare-schedules.py "$out" >"$out/schedules.md" || status=1
  tail -1 "$out/schedules.md" | tee -a "$out/summary.txt"
fi
step "done status=$status"
# TALLY_PACK=1: everything under OUTDIR in one archive, OUTDIR/all.tgz, the files themselves
# removed but summary.txt (the device tool brings back at most eight files a call).
if [ "${TALLY_PACK:-0}" = 1 ]; then
  pack="$(mktemp -d)/all.tgz"
  tar czf "$pack" -C "$out" --exclude=./summary.txt . && find "$out" -mindepth 1 ! -path "$out/summary.txt" -delete &&
    mv "$pack" "$out/all.tgz" || status=1
fi
exit $status
