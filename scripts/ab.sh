#!/usr/bin/env bash
# A/B of two versions of the kernels in one session on the GPU machine, each timed twice,
# alternating (A B A B), so that machine-to-machine differences cancel:
#   scripts/ab.sh OUTDIR
# B is this tree; A is this tree with the files under ab/A/ laid over it (the same paths, e.g.
# ab/A/src/core/ops.cuh = `git show HEAD:src/core/ops.cuh`). ab/ is ignored by git: send it with
# the device tool's carry (["ab"]). Both are built in parallel (about 3 minutes on 16 cores),
# then `tally bench numerics --quick` runs on each (AB_TABLES, default "accuracy stats";
# AB_SIZES, default 2^10..2^22). Prints, per table row, "A1:competitor/tally B1:... A2:... B2:...",
# graph times in us; the markdown of every run is left in OUTDIR.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
out=${1:?usage: scripts/ab.sh OUTDIR}
mkdir -p "$out"
[ -d ab/A ] || { echo "ab/A/ (the files of version A) is missing"; exit 2; }
sizes=${AB_SIZES:-2^10,2^12,2^14,2^16,2^18,2^20,2^22}
rm -rf /tmp/tally-A && mkdir -p /tmp/tally-A
tar --exclude=./build --exclude=./ab -cf - . | tar -xf - -C /tmp/tally-A && cp -r ab/A/. /tmp/tally-A/
(TALLY_SKIP_SETUP=1 TALLY_JOBS=16 bash scripts/build.sh dev >"$out/build-B.log" 2>&1 || echo "B: build failed") &
(cd /tmp/tally-A && TALLY_SKIP_SETUP=1 TALLY_JOBS=16 bash scripts/build.sh dev >"$out/build-A.log" 2>&1 ||
  echo "A: build failed") &
wait
for rep in 1 2; do
  for v in A B; do
    bin=build/dev/tally
    [ $v = A ] && bin=/tmp/tally-A/build/dev/tally
    "$bin" bench numerics --quick --tables ${AB_TABLES:-accuracy stats} --sizes "$sizes" --md "$out/$v$rep.md" \
      >/dev/null 2>&1 || echo "$v$rep: bench failed"
  done
done
python3 - "$out" <<'PY'
import sys, os, re, collections
out = sys.argv[1]
rows = collections.OrderedDict()
for tag in ('A1', 'B1', 'A2', 'B2'):
    p = os.path.join(out, tag + '.md')
    if not os.path.exists(p): continue
    title, hdr = '', None
    for l in open(p).read().split('\n'):
        if l.startswith('### '):
            title, hdr = ' '.join(l.split()[1:3]), None
        elif l.startswith('|    n'):
            hdr = [c.strip() for c in l.strip('|').split('|')]
        elif l.startswith('| 2^') and hdr:
            d = dict(zip(hdr, [c.strip() for c in l.strip('|').split('|')]))
            pair = (d['fast us'], d['exact us']) if 'exact us' in d else (d.get('tally sum us'), d.get('stats us'))
            rows.setdefault((title, d['n']), []).append(f"{tag}:{pair[0]}/{pair[1]}")
for (title, n), v in rows.items():
    print(f"{title:10} {n:>5}  " + ' '.join(v))
PY
