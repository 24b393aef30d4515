#!/usr/bin/env bash
# The test command: set-up, build everything (every kernel), run every test. Without a GPU the
# GPU tests report SKIPPED with the reason; with one they run. Usage: scripts/test.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-dev}
bash scripts/build.sh "$preset"
ctest --preset "$preset" -j "${TALLY_TEST_JOBS:-1}"
