#!/usr/bin/env bash
# The main job: set-up, build, then on the GPU show the device and run the core benchmark
# (tally vs CUB). Extra arguments go to `tally bench core` (e.g. --json out.json --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh dev
./build/dev/tally info
./build/dev/tally bench core "$@"
