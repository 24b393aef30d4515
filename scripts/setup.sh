#!/usr/bin/env bash
# Installs what tally needs to build on a fresh Debian/Ubuntu machine (apt-get, as root or with
# sudo). The CUDA toolkit (nvcc 12.4+ with CCCL) must already be there: it is not an apt package
# on every distribution. Safe to run again: it installs only what is missing.
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# OpenMPI: the launcher and the MPI side of the multi-GPU check and `tally bench dist` (libtally_dist
# itself needs only NCCL, which comes with the CUDA toolkit or the GPU image).
for p in cmake ninja-build g++ libgtest-dev libgmock-dev libcli11-dev libfmt-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin; do
  have_pkg "$p" || need+=("$p")
done
if ((${#need[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break; done
fi
command -v nvcc >/dev/null || { echo "setup: nvcc not found: install the CUDA toolkit (12.4 or newer)"; exit 1; }
# The Python package's build and tests (PyPI): nanobind (the binding generator), scikit-build-core
# (pip install .), pytest and numpy.
if ! python3 -c "import nanobind, pytest, numpy" 2>/dev/null; then
  echo "setup: pip installing nanobind, scikit-build-core, pytest, numpy"
  python3 -m pip install --quiet --disable-pip-version-check nanobind scikit-build-core pytest numpy
fi
