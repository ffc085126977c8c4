"""The README's two set-up commands: the main one installs only what the demo needs, CI runs the test one."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (pandas and SciPy are not here: wfdb, a dependency, needs them)
OPTIONAL = ["polars", "sklearn", "jax", "neurokit2", "sleepecg", "hypothesis", "cupy", "cudf"]


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_the_readme_names_two_commands_and_ci_runs_the_second():
    main, tests = _setup_commands()
    assert "devicepipe demo" in main and "[dev]" not in main  # the demo's install takes no extra
    assert "pytest" in tests
    assert tests in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


@pytest.mark.slow  # the whole demo in a process of its own; CI runs it
def test_the_demo_needs_no_optional_library(tmp_path):
    # every optional library replaced by a package that refuses to import, as in an install without extras
    stubs = tmp_path / "stubs"
    for name in OPTIONAL:
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed')\n")
    out = tmp_path / "d"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stubs), os.environ.get("PYTHONPATH", "")])}
    args = ["demo", "--out", str(out), "--epochs", "2", "--device", "cpu"]
    proc = subprocess.run([sys.executable, "-m", "devicepipe", *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "summary.json").exists()
    check = subprocess.run([sys.executable, "-c", "import polars"], capture_output=True, text=True, env=env)
    assert "polars is not installed" in check.stderr  # the stubs do hide the real libraries


def _pins() -> dict[str, str]:
    """``requirements.lock`` as {normalised name: version}."""
    pins = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} does not pin one version"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_the_lock_pins_every_dependency_and_both_commands_install_from_it():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *extras["dev"], *extras["bench"]]
    names = {re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]).lower() for req in wanted}
    names.discard("devicepipe")  # the dev extra's own bench extra
    pins = _pins()
    assert sorted(names - pins.keys()) == []
    assert pins["torch"] == "2.13.0"  # the CPU wheel the set-up command installs first
    for command in _setup_commands():
        assert "-c requirements.lock" in command
