#!/usr/bin/env bash
# Registers and spills of every kernel, as ptxas reports them for sm_90, without a GPU:
#   [PTXAS_REPORT_SOURCE=DIR] scripts/ptxas-report.sh [BUILD_DIR] [FILE_REGEX]
# recompiles the CUDA translation units of the build (default build/dev, configured by
# scripts/build.sh) whose path matches FILE_REGEX (default: the core, segmented and bench
# kernels) with -Xptxas -v into a scratch directory, and prints one line per kernel that spills
# (bytes stored / loaded, registers, the demangled name), then the registers of the dynamic
# schedule's and the strided grid's kernels. A spilling kernel in a hot path is a speed defect to
# measure; the register counts say how many blocks fit on an SM (65536 registers per SM).
# PTXAS_REPORT_SOURCE: compile the sources (src/, include/) under DIR instead of this checkout's,
# with the same flags -- another version's, e.g. `git archive HEAD~1 src include | tar -x -C DIR`,
# for a before/after comparison of a change.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
pattern=${2:-'src/(core|segmented)/instantiate_|src/bench/tune_'}
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
[ -f "$build/build.ninja" ] || { echo "no $build/build.ninja: run scripts/build.sh first" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mapfile -t cmds < <(ninja -C "$build" -t commands | grep -E "nvcc.* -c [^ ]*($pattern)[^ ]*\.cu( |$)" | sort -u)
[ ${#cmds[@]} -gt 0 ] || { echo "no CUDA sources match $pattern" >&2; exit 2; }
log="$scratch/ptxas.log"
i=0
for cmd in "${cmds[@]}"; do
  i=$((i + 1))
  if [ -n "${PTXAS_REPORT_SOURCE:-}" ]; then
    cmd=$(sed "s#$PWD/src#$PTXAS_REPORT_SOURCE/src#g; s#$PWD/include#$PTXAS_REPORT_SOURCE/include#g" <<<"$cmd")
  fi
  (cd "$build" && eval "$(sed -E "s# -o [^ ]+# -o $scratch/$i.o#" <<<"$cmd") -Xptxas -v") >>"$log" 2>&1 || {
    echo "compile failed: $cmd" >&2; exit 1; }
done
python3 - "$log" <<'PY'
import re, subprocess, sys
entries, cur, props = [], None, None
for line in open(sys.argv[1]):
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\w+)'", line)
    if m:
        cur = {"name": m.group(1), "arch": m.group(2)}
        entries.append(cur)
        continue
    if cur is None:
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m:  # the entry's own, or a called (not inlined) device function's, which follow it
        props = m.group(1)
        continue
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and props == cur["name"]:
        cur["stores"], cur["loads"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"Used (\d+) registers", line)
    if m:
        cur["regs"] = int(m.group(1))
seen, kernels = set(), []
for e in entries:
    if e["arch"] != "sm_90" or e["name"] in seen:
        continue
    seen.add(e["name"])
    kernels.append(e)
names = subprocess.run(["c++filt"], input="\n".join(k["name"] for k in kernels), capture_output=True,
                       text=True).stdout.splitlines()
for k, n in zip(kernels, names):
    k["pretty"] = re.sub(r"\(tally::[^()]*\)$", "", n.replace("tally::core::", "").replace("tally::seg::", ""))
spills = [k for k in kernels if k.get("stores", 0) or k.get("loads", 0)]
print(f"{len(kernels)} kernels, {len(spills)} spill")
for k in sorted(spills, key=lambda k: -k.get("loads", 0)):
    print(f"  spill {k.get('stores', 0):4d} / {k.get('loads', 0):4d} B, {k.get('regs', 0):3d} regs  {k['pretty'][:150]}")
print("registers of the one-pass kernels (dynamic schedule, strided grid):")
for k in kernels:
    if re.match(r"void (reduce_kernel_dynamic|reduce_kernel)<", k["pretty"]):
        print(f"  {k.get('regs', 0):3d} regs  {k['pretty'][:150]}")
PY
