"""Every code block of the README and of the pages it links in docs/ runs as written.

The shell lines of "Commands" run one after another in a scratch directory that holds what the
README says the reader has (``mitdb/100`` and ``AEP_hourly.csv``, from the shared data); the
Python blocks run each alone in test_readme_snippets.py, part of the README's test command.
Left out, each for the reason given: the set-up commands (they create
``.venv``; CI runs them from a fresh clone), a line that needs a GPU when there is none, and
the PhysioNet download (the tests run offline on the shared copy of that record).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from conftest import require_data

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)

pytestmark = pytest.mark.slow


#: The README, then the pages of docs/ it links, in the order it lists them.
PAGES = ["README.md", *(f"docs/{name}.md" for name in ("python", "recordings", "learning", "benchmarks", "reference"))]


def readme_blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block of the README and its docs pages, in order."""
    return [block for page in PAGES for block in BLOCK.findall((ROOT / page).read_text(encoding="utf-8"))]


def test_the_readme_links_every_docs_page_with_code():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"]({page})" in readme for page in PAGES[1:])
    # no page of docs/ holds shell or Python code that is not run here
    with_code = {
        p.name
        for p in (ROOT / "docs").glob("*.md")
        if any(lang in ("bash", "python") for lang, _ in BLOCK.findall(p.read_text(encoding="utf-8")))
    }
    assert with_code <= {page.split("/")[1] for page in PAGES[1:]}


def why_not_run(language: str, code: str) -> str | None:
    """Why a block is left out here (None: it runs)."""
    if "pip install" in code:
        return "installs into .venv; CI runs the set-up commands from a fresh clone"
    if "dl_database" in code:
        return "downloads from PhysioNet; the tests run offline on the shared copy of the record"
    if language not in ("bash", "python"):
        return f"not code ({language})"
    return None


def command_lines(code: str) -> list[str]:
    """The commands of a shell block, comments dropped."""
    lines = [line.split(" #", 1)[0].strip() for line in code.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def needs_gpu(line: str) -> bool:
    return bool(re.search(r"--device(=|\s+)cuda", line))


#: Commands another test runs as the README writes them and checks more closely (not run twice).
RUN_ELSEWHERE = {"bench": "tests/unit/test_bench.py::test_every_benchmark_runs_in_quick_mode"}


def run_elsewhere(line: str) -> bool:
    words = shlex.split(line)
    return len(words) > 1 and words[1] in RUN_ELSEWHERE


@pytest.fixture(scope="module")
def reader_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding what the README's examples read: mitdb/100, cpsc2019/ and AEP_hourly.csv."""
    work = tmp_path_factory.mktemp("readme")
    (work / "mitdb").symlink_to(require_data("mitdb"), target_is_directory=True)
    (work / "cpsc2019").symlink_to(require_data("cpsc2019"), target_is_directory=True)
    (work / "AEP_hourly.csv").symlink_to(require_data("electricity/AEP_hourly.csv"))
    return work


def written_by(line: str) -> set[str]:
    """The paths a command line writes: its ``--out`` (``simulate``'s file, a run directory)."""
    words = shlex.split(line)
    return {words[i + 1] for i, word in enumerate(words[:-1]) if word in ("--out", "-o")}


def chains(lines: list[str]) -> list[list[int]]:
    """The lines (indices, in order) in chains that must run one after another: a line joins the
    chain of every earlier line whose output it names (``ecg.csv``, or ``ecg.truth.csv`` beside
    it; a run directory to ``--resume`` or take a ``--model`` from). Chains run side by side."""
    root = list(range(len(lines)))  # union-find over the lines

    def find(i: int) -> int:
        while root[i] != i:
            i = root[i]
        return i

    writer: dict[str, int] = {}  # path -> the last line that wrote it
    for i, line in enumerate(lines):
        words = shlex.split(line)
        for path, j in writer.items():
            if any(w == path or w.startswith(path.rsplit(".", 1)[0] + ".") for w in words):
                root[find(i)] = find(j)
        writer |= dict.fromkeys(written_by(line), i)
    groups: dict[int, list[int]] = {}
    for i in range(len(lines)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


@pytest.fixture(scope="module")
def commands_run(reader_dir: Path) -> list[tuple[str, subprocess.CompletedProcess[str] | None]]:
    """Run every command line of the README's shell blocks (None: a GPU line without a GPU, or
    one run elsewhere): the lines of a chain in order, two chains at a time, so that this test's
    share of the suite's time does not hold one test process for minutes."""
    lines = [
        line
        for language, code in readme_blocks()
        if language == "bash" and not why_not_run(language, code)
        for line in command_lines(code)
    ]
    ran: list[subprocess.CompletedProcess[str] | None] = [None] * len(lines)

    def run(chain: list[int]) -> None:
        for i in chain:
            line = lines[i]
            if (needs_gpu(line) and not torch.cuda.is_available()) or run_elsewhere(line):
                continue
            words = shlex.split(line)
            assert words[0] == "devicepipe", line
            ran[i] = subprocess.run(
                [sys.executable, "-m", "devicepipe", *words[1:]],
                cwd=reader_dir,
                capture_output=True,
                text=True,
                env={**os.environ, "COLUMNS": "160"},
            )

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, chains(lines)))
    return list(zip(lines, ran, strict=True))


def test_chains_keep_a_line_after_the_lines_whose_outputs_it_reads():
    lines = [
        "devicepipe simulate ecg --out ecg.csv",
        "devicepipe series AEP.csv --out run-aep",
        "devicepipe beats ecg.csv --out b --reference ecg.truth.csv",
        "devicepipe info",
        "devicepipe score AEP.csv --model run-aep --out score-aep",
        "devicepipe ecg ecg.csv --out run --epochs 20",
        "devicepipe ecg ecg.csv --out run --resume --epochs 40",
    ]
    assert sorted(chains(lines)) == [[0, 2, 5, 6], [1, 4], [3]]


def test_the_readme_has_the_blocks_this_test_runs():
    blocks = readme_blocks()
    assert sum(lang == "bash" and not why_not_run(lang, code) for lang, code in blocks) >= 1
    assert sum(lang == "python" and not why_not_run(lang, code) for lang, code in blocks) >= 4
    # every block is either run or left out for a reason given above
    assert {lang for lang, _ in blocks} <= {"bash", "python"}


def test_every_readme_command_runs_as_written(commands_run):
    assert len(commands_run) >= 10
    failed = [
        f"{line}\n  exit {proc.returncode}: {proc.stderr.strip()[-500:]}"
        for line, proc in commands_run
        if proc is not None and proc.returncode != 0
    ]
    assert not failed, "\n".join(failed)
    by_line = {line: proc for line, proc in commands_run}
    # what the commands' comments promise
    beats_sim = next(p for line, p in by_line.items() if line.startswith("devicepipe beats ecg.csv"))
    assert "F1" in beats_sim.stdout  # the simulator's truth file is accepted as a reference
    beats_100 = next(p for line, p in by_line.items() if line.startswith("devicepipe beats mitdb/100"))
    assert "F1 1.0000" in beats_100.stdout  # MIT-BIH 100, as the README states
    score_100 = next(p for line, p in by_line.items() if line.startswith("devicepipe score mitdb/100"))
    assert "flag rate by AAMI class: N" in score_100.stdout  # a population model on a recording it never saw
    skipped = [line for line, proc in commands_run if proc is None]
    assert all(needs_gpu(line) or run_elsewhere(line) for line in skipped)
    bench = (ROOT / "tests" / "unit" / "test_bench.py").read_text(encoding="utf-8")
    assert '["bench", "--quick"' in bench  # (the command run there is the README's, on the CPU)
