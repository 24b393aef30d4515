#!/usr/bin/env bash
# Set-up and build with a CMake preset (default: dev). Usage: scripts/build.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-dev}
[ "${TALLY_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "${TALLY_JOBS:-$(nproc)}"
