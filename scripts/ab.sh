#!/usr/bin/env bash
# A/B of two versions of the kernels in one session on the GPU machine, each timed twice,
# alternating (A B A B), so that machine-to-machine differences cancel:
#   scripts/ab.sh OUTDIR
# B is this tree; A is this tree with the files under ab/A/ laid over it (the same paths, e.g.
# ab/A/src/core/ops.cuh = `git show HEAD:src/core/ops.cuh`). A file new in B that A's code cannot
# compile (a test of B's new code) needs a stand-in under ab/A/ too, e.g. an empty file of that
# path (a new test in B's tree once broke A's build). ab/ is ignored by git: send it with
# the device tool's carry (["ab"]). Both are built in parallel (about 3 minutes on 16 cores
# when B's build/ is already there; on a fresh machine the two full builds took 6-7 minutes, past
# a 300 s timeout, on 2026-11-28: give a fresh machine's A/B the whole 600 s call),
# then `tally bench numerics --quick` runs on each (AB_TABLES, default "accuracy stats";
# AB_SIZES, default 2^10..2^22), or with AB_BENCH=core `tally bench core --quick --no-cold`;
# AB_SCHEDULE passes --schedule (policy, strided, dynamic); AB_BENCH=segmented runs `tally bench
# segmented --quick --totals AB_TOTALS` (default 20) and compares tally's time of every row of its
# tables (rows, columns, ragged, dot; the graph time there). Prints, per table row and per graph
# time of tally's, "A1:us B1:us A2:us B2:us  B/A ratio"; the markdown and JSON of every run are
# left in OUTDIR.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
out=${1:?usage: scripts/ab.sh OUTDIR}
mkdir -p "$out"
[ -d ab/A ] || { echo "ab/A/ (the files of version A) is missing"; exit 2; }
# (A stale file left in ab/A/ by an earlier A/B once broke A's build: say what A is.)
echo "A = this tree with: $(cd ab/A && find . -type f | sed 's#^\./##' | sort | tr '
' ' ')"
sizes=${AB_SIZES:-2^10,2^12,2^14,2^16,2^18,2^20,2^22}
# A's tree is laid out afresh each time, but its build/ is kept (mtimes preserved: tar, cp -p), so a
# second A/B on the same warm machine rebuilds nothing that did not change.
mkdir -p /tmp/tally-A && find /tmp/tally-A -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
tar --exclude=./build --exclude=./ab -cf - . | tar -xf - -C /tmp/tally-A && cp -rp ab/A/. /tmp/tally-A/
(TALLY_SKIP_SETUP=1 TALLY_JOBS=16 bash scripts/build.sh dev >"$out/build-B.log" 2>&1 || echo "B: build failed") &
(cd /tmp/tally-A && TALLY_SKIP_SETUP=1 TALLY_JOBS=16 bash scripts/build.sh dev >"$out/build-A.log" 2>&1 ||
  echo "A: build failed") &
wait
bench=${AB_BENCH:-numerics}
for rep in 1 2; do
  for v in A B; do
    bin=build/dev/tally
    [ $v = A ] && bin=/tmp/tally-A/build/dev/tally
    if [ "$bench" = segmented ]; then
      "$bin" bench segmented --quick --totals ${AB_TOTALS:-20} --md "$out/$v$rep.md" --json "$out/$v$rep.json" \
        >/dev/null 2>&1 || echo "$v$rep: bench failed"
    elif [ "$bench" = core ]; then
      "$bin" bench core --quick --no-cold ${AB_SCHEDULE:+--schedule $AB_SCHEDULE} --md "$out/$v$rep.md" \
        --json "$out/$v$rep.json" >/dev/null 2>&1 || echo "$v$rep: bench failed"
    else
      "$bin" bench numerics --quick --tables ${AB_TABLES:-accuracy stats} --sizes "$sizes" \
        ${AB_SCHEDULE:+--schedule $AB_SCHEDULE} --md "$out/$v$rep.md" --json "$out/$v$rep.json" >/dev/null 2>&1 ||
        echo "$v$rep: bench failed"
    fi
  done
done
python3 - "$out" <<'PY'
# Per table row (warm cache): every graph time of tally's (graph_tally_us, graph_fast_us,
# graph_exact_us, ...; not the competitors') in A1 B1 A2 B2, then B's mean over A's.
import collections, json, os, sys
out = sys.argv[1]
rows = collections.OrderedDict()
for tag in ('A1', 'B1', 'A2', 'B2'):
    p = os.path.join(out, tag + '.json')
    if not os.path.exists(p):
        continue
    for t in json.load(open(p))['tables']:
        for r in t['rows']:
            if 'tally_us' in r and 'op' not in r:  # bench segmented: a row per shape, tally's graph time
                what = r.get('form', 'ragged' if 'segments' in r else 'dot')
                rows.setdefault((what, r['total'], r.get('shape', r.get('segments')), r['plan'][:6]), {})[tag] = r['tally_us']
                continue
            if r.get('cache', 'warm') != 'warm':
                continue
            for k, v in r.items():
                if k.startswith('graph_') and k.endswith('_us') and not any(
                        c in k for c in ('cub', 'other', 'cublas')) and isinstance(v, (int, float)):
                    rows.setdefault((r['op'], r['dtype'], r['n'], k[6:-3]), {})[tag] = v
for (op, dt, n, what), v in rows.items():
    a = [v[t] for t in ('A1', 'A2') if t in v]
    b = [v[t] for t in ('B1', 'B2') if t in v]
    ratio = f"B/A {sum(b) / len(b) / (sum(a) / len(a)):.3f}" if a and b else ""
    print(f"{op:>10} {dt:>4} {n:>5} {what:>6}  " + ' '.join(f"{t}:{v[t]:.2f}" for t in ('A1', 'B1', 'A2', 'B2') if t in v)
          + f"  {ratio}")
PY
