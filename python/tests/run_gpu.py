"""The Python GPU tests (test_gpu.py) under pytest, or exit 77 (ctest: skipped) without a GPU."""
import os
import sys

import pytest

import tally

if tally.device_count() == 0:
    print("no CUDA GPU on this machine: the Python GPU tests are skipped")
    sys.exit(77)
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.join(os.path.dirname(__file__), "test_gpu.py")]))
