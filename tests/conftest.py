"""Shared fixtures: a ``device`` fixture (cpu always, cuda when present) and real-data access.

Tests marked ``slow`` run only with ``DEVICEPIPE_RUN_SLOW=1`` (CI sets it) or ``-m slow``.
Tests under ``tests/data`` are marked ``data``. They skip with a reason when
``../shared/data`` is absent, and fail instead when ``DEVICEPIPE_REQUIRE_DATA=1``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("DEVICEPIPE_DATA", ROOT.parent / "shared" / "data"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the evaluation harness on the shared data lives there

CUDA = torch.cuda.is_available()
if os.environ.get("PYTEST_XDIST_WORKER"):
    # several workers (pytest -n N): the cores divided among them, or two-thread workers on two
    # cores run the small tensor operations of these tests many times slower
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not CUDA, reason="no CUDA GPU")]),
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_slow = os.environ.get("DEVICEPIPE_RUN_SLOW") == "1" or "slow" in (config.getoption("-m") or "")
    skip_slow = pytest.mark.skip(reason="slow: set DEVICEPIPE_RUN_SLOW=1 or pass -m slow")
    skip_cuda = pytest.mark.skip(reason="no CUDA GPU")
    for item in items:
        if item.get_closest_marker("cuda") is not None and not CUDA:
            item.add_marker(skip_cuda)
        if "tests/data/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.data)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
    # slow tests first (a stable sort): with several workers the longest files start at once
    # instead of finishing last
    items.sort(key=lambda item: 0 if "slow" in item.keywords else 1)


@pytest.fixture(autouse=True)
def _compiled_path_as_it_was() -> object:
    """A command run in this process on one recording turns the compiled detector off for the
    process (``DEVICEPIPE_COMPILED=0``, :func:`devicepipe.cli.many.one_recording`): each test
    starts and ends with the environment's setting as it was."""
    before = os.environ.get("DEVICEPIPE_COMPILED")
    yield
    if before is None:
        os.environ.pop("DEVICEPIPE_COMPILED", None)
    else:
        os.environ["DEVICEPIPE_COMPILED"] = before


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each test using it runs on the CPU and, where one exists, on a CUDA GPU."""
    return torch.device(request.param)


def require_data(relative: str) -> Path:
    """Path of a file or folder in the shared data; skip (or fail under DEVICEPIPE_REQUIRE_DATA=1) if absent."""
    path = DATA_DIR / relative
    probe = path if path.suffix or path.is_dir() else path.with_name(path.name + ".hea")
    if not probe.exists():
        message = f"real recording {path} not found (the README's table says where to get it; DEVICEPIPE_DATA=DIR)"
        if os.environ.get("DEVICEPIPE_REQUIRE_DATA") == "1":
            pytest.fail(message + " and DEVICEPIPE_REQUIRE_DATA=1")
        pytest.skip(message)
    return path


@pytest.fixture
def data_dir() -> Path:
    return require_data("")


def leaves_imported(code: str, module: str) -> bool:
    """Whether running ``code`` in a fresh interpreter leaves ``module`` imported (``torch._dynamo``:
    a second or more of a command's start, for a compiler nothing here uses)."""
    import subprocess

    check = f"{code}\nimport sys\nprint({module!r} in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1] == "True"
