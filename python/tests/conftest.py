"""The suite runs on the package in this checkout (python/flashlab) and the library CTest names in
FLASHLAB_LIBRARY (else the clone's build tree); CLI comparisons run FLASHLAB_CLI (else build/cli/flashlab)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("FLASHLAB_CLI") or os.path.join(HERE, os.pardir, os.pardir, "build", "cli", "flashlab")
    if not os.path.isfile(path):
        pytest.skip(f"no flashlab CLI at {path}: build it (cmake --build build --target flashlab) or set FLASHLAB_CLI")
    return path
