#!/usr/bin/env bash
# The main job: set-up, build, then on the GPU show the device and run the core benchmark
# (tally vs CUB) and the numerics benchmark (argmin/argmax vs CUB, dot vs cuBLAS, accuracy
# modes, stats, f16/bf16). Extra arguments go to `tally bench core` (e.g. --json out.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh dev
./build/dev/tally info
./build/dev/tally bench core "$@"
./build/dev/tally bench numerics
