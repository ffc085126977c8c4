import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import wfdb
from typer.testing import CliRunner

import devicepipe
from conftest import require_data
from devicepipe.bench.results import source_commit
from devicepipe.cli import app
from devicepipe.ecg import ecg_peaks, evaluate_beats
from devicepipe.io import read_series

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def assert_user_error(result, pattern):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("devicepipe: error: ")
    assert pattern in lines[0]
    assert "Traceback" not in result.output


def test_info_table_and_json():
    result = run("info")
    assert result.exit_code == 0
    assert "PyTorch" in result.stdout and "Optional libraries" in result.stdout
    result = run("info", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert {"python", "torch", "gpus", "cpu", "libraries"} <= set(report)


def test_simulate_ecg_csv_and_read_back(tmp_path):
    out = tmp_path / "ecg.csv"
    result = run("simulate", "ecg", "--duration", "2min", "--sampling-rate", 360, "--ectopic-rate", 0.05, "--out", out)
    assert result.exit_code == 0, result.output
    with open(tmp_path / "ecg.truth.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    truth = {"sample": np.array([int(r["sample"]) for r in rows]), "symbol": [r["symbol"] for r in rows]}
    rec = read_series(out, sampling_rate=360)
    assert rec.n_samples == 120 * 360
    assert 100 < len(rows) < 180  # about 70 bpm for two minutes
    assert set(truth["symbol"]) <= {"N", "V"}
    # the file holds the signal: each true peak is near the local maximum of what was written
    x = rec.samples.numpy()
    for s in truth["sample"][:20]:
        assert abs(int(np.argmax(x[max(0, s - 20) : s + 21])) - min(s, 20)) <= 3
    result = run("read", out, "--sampling-rate", 360, "--json")
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary["n_samples"] == 120 * 360 and summary["duration_s"] == pytest.approx(120)


def test_simulate_ecg_parquet_keeps_the_rate(tmp_path):
    out = tmp_path / "e.parquet"
    assert (
        run("simulate", "ecg", "--duration", "30s", "--sampling-rate", 500, "--inverted", "--out", out).exit_code == 0
    )
    rec = read_series(out)
    assert rec.sampling_rate == 500 and float(rec.samples.min()) < -0.8  # inverted: deep negative R waves


def test_simulate_load_and_read_with_time_column(tmp_path):
    out = tmp_path / "load.csv"
    result = run("simulate", "load", "--days", 30, "--anomalies", 2, "--out", out)
    assert result.exit_code == 0, result.output
    rec = read_series(out, "load_MW", time_column="Datetime")
    assert rec.n_samples == 30 * 24 and rec.time_report.regular
    result = run("read", out, "--time-column", "Datetime", "-c", "load_MW")
    assert result.exit_code == 0 and "duplicate timestamps: 0" in result.stdout
    assert "times from column" not in result.stdout  # named, not found
    # no column named: the column of times is found, and the times are said as written
    shuffled = tmp_path / "shuffled.csv"
    lines = out.read_text().splitlines()
    shuffled.write_text("\n".join([lines[0], lines[5], *lines[1:5], *lines[6:], lines[1]]) + "\n")
    result = run("read", shuffled)
    assert result.exit_code == 0, result.output
    first, last = (pd.Timestamp(line.split(",")[0]).isoformat() for line in (lines[1], lines[-1]))
    assert "times from column 'Datetime'" in result.stdout and "1 channel(s)" in result.stdout
    assert f"{1 / 3600:g} Hz (a sample every 1.00 h)" in result.stdout
    assert f"rows, {first} to {last}, step 1.00 h" in result.stdout
    assert "sorted on input: no" in result.stdout and "duplicate timestamps: 1" in result.stdout


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["read", "{tmp}/missing.csv"], "file not found"),
        (["read", "{tmp}/x.csv", "--device", "gpu"], "unknown device 'gpu'; use 'cuda:0'"),
        (["read", "{tmp}/x.csv", "-c", "nope"], "column 'nope' not found"),
        (["read", "{tmp}/x.csv", "--nan", "bogus"], "Invalid value for '--nan': 'bogus' is not one of"),
        (["simulate", "ecg", "--duration", "24x", "--out", "{tmp}/o.csv"], "cannot read duration '24x'"),
        (["simulate", "ecg", "--out", "{tmp}/o.xlsx"], "use a .csv, .parquet or .npy"),
        (["simulate", "ecg", "--out", "{tmp}/o.csv", "--sampling-rate", "5"], "--sampling-rate"),
        (["simulate", "load", "--out", "{tmp}/o.npy"], "has timestamps"),
        (["read"], "Missing argument"),
        (["nonsense"], "No such command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, pattern):
    (tmp_path / "x.csv").write_text("a\n1\n2\n")
    result = run(*[a.format(tmp=tmp_path) for a in args])
    assert_user_error(result, pattern)
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "o.truth.csv").exists()


def test_cuda_request_without_cuda(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    (tmp_path / "x.csv").write_text("a\n1\n")
    assert_user_error(run("read", tmp_path / "x.csv", "--device", "cuda"), "--device cpu")


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "devicepipe", "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "simulate" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "devicepipe", "read", "/nonexistent.csv"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("command", [[], ["beats"], ["ecg"], ["series"], ["read"], ["simulate", "ecg"], ["demo"]])
def test_help_shows_flags_without_a_value_and_arguments_in_capitals(command):
    result = run(*command, "--help")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "--help" in text
    assert "<bool>" not in text  # a flag takes no value, so help shows none
    assert "{" not in text.split("\n", 3)[1]  # the usage line
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    if command and command[0] in {"beats", "ecg", "series", "read"}:
        assert usage.rstrip().endswith("INPUT"), usage
    if command:  # every option the help names is one this command has
        from typer.main import get_command

        group = get_command(app)
        for name in command:
            group = group.commands[name]
        options = {o for p in group.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", " ".join(text.replace("│", " ").split())))
        options.add("--help")
        assert named <= options, named - options


def _commands():
    """Every command as ``(words, click command)``: ``(["simulate", "ecg"], ...)``."""
    from typer.main import get_command

    found = []

    def walk(group, words):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, [*words, name])
            else:
                found.append(([*words, name], command))

    walk(get_command(app), [])
    return found


@pytest.mark.parametrize(("words", "command"), _commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_help_fits_a_screen_and_every_option_is_in_full_in_the_docs(words, command):
    result = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and len(lines) <= 50, f"{len(lines)} lines"
    assert max(len(line) for line in lines) <= 80
    # each option's details: in its command's section of docs/commands.md
    docs = (Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text(encoding="utf-8")
    section = docs.split(f"## `devicepipe {' '.join(words)}`\n", 1)[1].split("\n## ", 1)[0]
    for param in command.params:
        for name in [o for o in param.opts if o.startswith("--")] or [param.name.upper()]:
            assert f"`{name}`" in section, f"{name} of {' '.join(words)} is not in docs/commands.md"


@pytest.mark.parametrize("group", [[], ["simulate"]])
def test_the_command_lists_say_each_command_in_full_at_80_columns(group):
    result = runner.invoke(app, [*group, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    listed = result.stdout.split("Commands:", 1)[1].splitlines()[1:]
    assert listed and not [line for line in listed if re.search(r"\w\.\.\.$", line)]  # none cut off with "..."


def test_mode_help_says_why_the_defaults_differ():
    for command, default in (("beats", "seed"), ("ecg", "centered")):
        text = " ".join(run(command, "--help").stdout.replace("│", " ").split())
        assert f"{default} (the default here" in text, text


def test_beats_on_a_simulated_csv(tmp_path):
    src = tmp_path / "ecg.csv"
    assert run("simulate", "ecg", "--duration", "3min", "--ectopic-rate", 0.02, "--out", src).exit_code == 0
    out = tmp_path / "run"
    result = run("beats", src, "--sampling-rate", 250, "--out", out, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "beats found" in result.stdout
    table = pq.read_table(out / "beats.parquet")
    assert table.column_names == ["peak", "time_s", "rr_s", "kept", "quality", "stretch_quality", "class", "reason"]
    with open(tmp_path / "ecg.truth.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    truth = [int(r["sample"]) for r in rows]
    # every simulated ventricular beat is classed V, and nothing else is
    found = table.column("peak").to_numpy()
    nearest = np.abs(found[None, :] - np.array(truth)[:, None]).argmin(1)
    assert np.abs(found[nearest] - truth).max() <= 2
    classes = np.array(table.column("class").to_pylist())[nearest]
    assert list(classes) == [r["class"] for r in rows] and "V" in classes

    assert evaluate_beats(truth, table.column("peak").to_numpy(), 250, n_samples=180 * 250).f1 >= 0.99
    matrix = np.load(out / "beat_matrix.npy")
    assert matrix.shape == (int(np.sum(table.column("kept").to_numpy())), 256)
    for name in ("excerpt.png", "intervals.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["beats_found"] == table.num_rows and summary["sampling_rate_hz"] == 250
    assert summary["counts"]["beats_kept"] == int(np.sum(table.column("kept").to_numpy()))
    # quality: each kept beat's correlation with the median row of the matrix, NaN where not kept
    kept = table.column("kept").to_numpy()
    quality = table.column("quality").to_numpy()
    assert np.isnan(quality[~kept]).all()
    template = np.sort(matrix, axis=0)[(matrix.shape[0] - 1) // 2]
    expected = [np.corrcoef(row, template)[0, 1] for row in matrix]
    np.testing.assert_allclose(quality[kept], expected, atol=1e-5)
    assert summary["quality"]["beats_rated"] == matrix.shape[0] and summary["quality"]["beats_poor"] <= 2


def test_beats_with_reference_on_mitdb(tmp_path):
    record = require_data("mitdb/100")
    result = run("beats", record, "--out", tmp_path / "r", "--reference", record.with_suffix(".atr"), "--no-figures")
    assert result.exit_code == 0, result.output
    assert "F1 1.0000" in result.stdout or "F1 0.99" in result.stdout
    assert not (tmp_path / "r" / "excerpt.png").exists()
    # the counts inside the scoring window, in the terminal and summary.json alike, re-derived from the files
    accuracy = json.loads((tmp_path / "r" / "summary.json").read_text())["accuracy"]
    fs, n = 360.0, read_series(record).n_samples
    ref = wfdb.rdann(str(record), "atr")
    beat_symbols = set("NLRBAaJSVrFejnE/fQ?")
    in_window = [s for s, sym in zip(ref.sample, ref.symbol, strict=True) if sym in beat_symbols and 180 <= s < n - 180]
    assert accuracy["reference_beats_in_window"] == len(in_window) == accuracy["tp"] + accuracy["fn"]
    assert accuracy["scoring_window_s"] == [0.5, n / fs - 0.5]
    assert f"{len(in_window):,} reference beats" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o"], "sampling rate of x.csv is unknown"),
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o", "--sampling-rate", "250"], "at least two seconds"),
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o", "--method", "pan"], "'pan' is not one of"),
        (["beats", "{tmp}/x.csv", "--out", "{tmp}/o", "--channel", "zz", "--sampling-rate", "1"], "column 'zz'"),
    ],
)
def test_beats_bad_input_writes_nothing(tmp_path, args, pattern):
    (tmp_path / "x.csv").write_text("a\n1\n2\n")
    assert_user_error(run(*[a.format(tmp=tmp_path) for a in args]), pattern)
    assert not (tmp_path / "o").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.")]


def test_interop_matrix_small():
    pytest.importorskip("polars", reason="the matrix's Polars pairs need Polars (the dev extra)")
    result = run("interop", "--size", 100_000, "--repeats", 1, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # what a committed result needs to be dated and traced to the code it measured
    assert report["date"][:4].isdigit() and report["threads"] >= 1
    assert report["commit"] == source_commit() and report["machine"]["cpu"]["logical_cores"] >= 1
    pairs = {(p["source"], p["target"]): p["status"] for p in report["pairs"]}
    for a in ("torch", "numpy", "pyarrow", "pandas", "polars"):
        for b in ("torch", "numpy", "pyarrow", "pandas", "polars"):
            assert pairs[(a, b)] == "zero-copy", (a, b)
    assert report["handoff"]["handoff_shares_memory"] is True
    table = run("interop", "--size", 10_000, "--repeats", 1)
    assert table.exit_code == 0 and "zero-copy" in table.stdout and "host round trip" in table.stdout


def test_an_unknown_sampling_rate_is_said_before_reading(tmp_path):
    (tmp_path / "g.csv").write_text("ecg\nnot a number\n")  # reading it would fail with another message
    assert_user_error(run("beats", tmp_path / "g.csv", "--out", tmp_path / "o"), "sampling rate of g.csv is unknown")
    assert_user_error(run("ecg", tmp_path / "g.csv", "--out", tmp_path / "o"), "sampling rate of g.csv is unknown")
    assert not (tmp_path / "o").exists()


def test_the_simulators_truth_is_a_reference_checked_before_reading(tmp_path):
    run("simulate", "ecg", "--duration", "2min", "--out", tmp_path / "e.csv")
    good = run(
        "beats",
        tmp_path / "e.csv",
        "--sampling-rate",
        250,
        "--out",
        tmp_path / "b",
        "--reference",
        tmp_path / "e.truth.csv",
        "--no-figures",
    )
    assert good.exit_code == 0, good.output
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["accuracy"]["f1"] == 1.0 and summary["accuracy"]["tp"] > 100
    # the terminal says which beats were scored, and the count agrees with the truth file
    line = [ln for ln in good.stdout.splitlines() if ln.startswith("accuracy against")][0]
    scored = summary["accuracy"]["tp"] + summary["accuracy"]["fn"]
    assert f"{scored:,} reference beats and" in line and "all but the first and last 0.5 s" in line
    truth = np.loadtxt(tmp_path / "e.truth.csv", delimiter=",", skiprows=1, usecols=0)
    assert scored == int(((truth >= 125) & (truth < 120 * 250 - 125)).sum())  # 0.5 s at 250 Hz either end
    bad = run(
        "beats", tmp_path / "e.csv", "--sampling-rate", 250, "--out", tmp_path / "c", "--reference", tmp_path / "e.csv"
    )  # the recording itself: no column of R peaks
    assert_user_error(bad, "e.csv has no column of R peaks")
    assert not (tmp_path / "c").exists()


def test_threads_and_stopping_are_checked_before_any_work(tmp_path, monkeypatch):
    run("simulate", "ecg", "--duration", "1min", "--out", tmp_path / "e.parquet")
    monkeypatch.setenv("DEVICEPIPE_THREADS", "many")
    assert_user_error(run("ecg", tmp_path / "e.parquet", "--out", tmp_path / "r"), "DEVICEPIPE_THREADS='many'")
    assert not (tmp_path / "r").exists()  # nothing was read or written
    monkeypatch.setenv("DEVICEPIPE_THREADS", "1")
    done = run("ecg", tmp_path / "e.parquet", "--out", tmp_path / "r", "--epochs", "2", "--device", "cpu")
    assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    threads = summary["threads"]
    assert threads == {
        "threads": 1,
        "reason": "DEVICEPIPE_THREADS",
        "step_flops": None,
        "wait_policy": threads["wait_policy"],
    }
    assert threads["wait_policy"] == (os.environ.get("OMP_WAIT_POLICY", "").upper() or "default")  # as it ran
    assert summary["epochs"] == {"limit": 2, "run": [2], "kept": [2], "stopped_early": [False]}
    # a run trained for exact epochs holds no stopping state: resuming it "until learned" is refused at once
    again = run("ecg", tmp_path / "e.parquet", "--out", tmp_path / "r", "--resume", "--device", "cpu")
    assert_user_error(again, "trained for an exact number of epochs; resume it with --epochs N")
    assert "finding beats" not in again.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["ecg", "{tmp}/e.parquet", "--out", "{tmp}/afile", "--epochs", "1"],
        ["series", "{tmp}/l.csv", "--out", "{tmp}/afile", "--epochs", "1"],
        ["beats", "{tmp}/e.parquet", "--out", "{tmp}/afile"],
        ["bench", "--quick", "--out", "{tmp}/afile"],
        ["demo", "--out", "{tmp}/afile"],
        ["simulate", "ecg", "--out", "{tmp}/afile/x.csv"],
        ["ecg", "{tmp}/e.parquet", "--out", "{tmp}/afile/sub"],
    ],
)
def test_out_that_is_a_file_is_a_clear_error(tmp_path, args):
    run("simulate", "ecg", "--duration", "1min", "--out", tmp_path / "e.parquet")
    run("simulate", "load", "--days", 21, "--out", tmp_path / "l.csv")
    (tmp_path / "afile").write_text("keep me")
    assert_user_error(run(*[a.format(tmp=tmp_path) for a in args]), "afile")
    assert (tmp_path / "afile").read_text() == "keep me"


def test_numeric_time_column_is_named(tmp_path):
    run("simulate", "load", "--days", 21, "--out", tmp_path / "l.csv")
    result = run("series", tmp_path / "l.csv", "--out", tmp_path / "r", "--time-column", "load_MW")
    assert_user_error(result, "time column 'load_MW' of l.csv holds numbers, not times")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("presets", "expected"), [(False, ["1", "system"]), (True, ["0", "mimalloc"])])
def test_cli_sets_huge_pages_before_torch_and_arrow_s_allocator_before_arrow_loads(presets, expected):
    # PyTorch reads THP_MEM_ALLOC_ENABLE once, at its first allocation, and Arrow picks its
    # allocator at its first: the CLI must set both before (huge pages; the C library's
    # allocator, which hands freed memory back), and leave a user's explicit choice alone.
    # The huge-page variable is recorded at the moment anything first imports torch.
    code = (
        "import importlib.abc, os, sys\n"
        "seen = []\n"
        "class Watch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'torch' and not seen:\n"
        "            seen.append(os.environ.get('THP_MEM_ALLOC_ENABLE'))\n"
        "sys.meta_path.insert(0, Watch())\n"
        "from devicepipe.cli import app  # the commands load as main() loads them\n"
        "import pyarrow as pa, pyarrow.parquet as pq, io\n"
        "pq.write_table(pa.table({'x': list(range(1000))}), io.BytesIO())\n"
        "print(seen[0], pa.default_memory_pool().backend_name)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("THP_MEM_ALLOC_ENABLE", "ARROW_DEFAULT_MEMORY_POOL")}
    if presets:
        env |= {"THP_MEM_ALLOC_ENABLE": "0", "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == expected


@pytest.mark.parametrize("args", [["--version"], ["--help"], [], ["simulate", "--help"], ["beatz"]])
def test_the_version_the_help_and_a_typo_import_no_command_and_no_torch(args):
    # a command's module (and torch, the pipelines) is imported when the command is asked for:
    # these took 3 s, importing every command
    code = (
        "import sys\n"
        "from devicepipe.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('devicepipe.cli.commands.'))\n"
        "print('torch' in sys.modules, 'numpy' in sys.modules, loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    said = done.stderr.strip().splitlines()[-1]
    if args[:1] == ["simulate"]:  # the one command asked for (which simulates with torch)
        assert said == "True True ['devicepipe.cli.commands.simulate']", done.stderr
    else:
        assert said == "False False []", done.stderr
    if args == ["--help"] or not args:
        from devicepipe.cli.application import COMMANDS

        shown = " ".join((done.stdout + done.stderr).split())
        for name, (_, text) in COMMANDS.items():  # every command, with what it answers
            assert f"{name} {text}" in shown
    if args == ["beatz"]:
        assert "No such command 'beatz'. Did you mean 'beats'?" in done.stderr


def test_the_table_of_commands_is_the_commands_registered():
    from devicepipe.cli import app  # every command imported
    from devicepipe.cli.application import COMMANDS

    names = [c.name or c.callback.__name__ for c in app.registered_commands] + [g.name for g in app.registered_groups]
    assert sorted(names) == sorted(COMMANDS)
    for info in app.registered_commands:
        assert info.short_help == COMMANDS[info.name or info.callback.__name__][1]


def test_version_flag_and_info():
    result = run("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"devicepipe {devicepipe.__version__}"
    report = json.loads(run("info", "--json").stdout)
    assert report["devicepipe"] == devicepipe.__version__


def test_without_a_terminal_lines_are_whole_and_progress_is_plain(tmp_path):
    run("simulate", "ecg", "--duration", "1min", "--out", tmp_path / "e.parquet")
    result = run("ecg", tmp_path / "e.parquet", "--out", tmp_path / "r", "--epochs", "3", "--device", "cpu")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    progress = [ln for ln in lines if ln.startswith("training: epoch")]
    assert [ln.split(",")[0] for ln in progress] == [f"training: epoch {e} of 3" for e in (1, 2, 3)]
    # the result lines are not wrapped at 80 columns
    trained = [ln for ln in lines if ln.startswith("trained 3 epochs (as asked)")]
    assert len(trained) == 1 and trained[0].endswith("(policy)")
    found = [ln for ln in lines if " beats found, " in ln]
    assert len(found) == 1 and "final loss" in found[0] and len(found[0]) > 80
    outputs = [ln for ln in lines if ln.startswith("outputs in ")]
    assert len(outputs) == 1 and outputs[0].endswith("training.png")


def test_beats_on_all_leads_of_mitdb(tmp_path):
    record = require_data("mitdb/100")
    result = run(
        "beats", record, "--out", tmp_path / "r", "--channel", "all", "--reference", record.with_suffix(".atr"),
        "--no-figures",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    rec = read_series(record)
    assert summary["beats_found_on_leads"] == list(rec.channels) == ["MLII", "V5"]
    assert summary["channel"] == "MLII"  # the beats are cut from the first lead
    fused = ecg_peaks(rec.samples, rec.sampling_rate, leads="fuse").numpy()
    table = pq.read_table(tmp_path / "r" / "beats.parquet")
    np.testing.assert_array_equal(table.column("peak").to_numpy(), fused)
    assert summary["accuracy"]["f1"] >= 0.999
    # --channel all with chunks is refused in one line, nothing written
    refused = run("beats", record, "--out", tmp_path / "c", "--channel", "all", "--chunk", "10min")
    assert_user_error(refused, "--channel all finds beats on every channel in one piece")
    assert not (tmp_path / "c").exists()


def test_beats_marks_the_unusable_stretches(tmp_path):
    from devicepipe.io import write_parquet
    from devicepipe.simulate import simulate_ecg

    fs = 250
    sim = simulate_ecg(120, fs, seed=7, ectopic_rate=0.08)
    x = sim.signal.clone()
    x[40 * fs : 60 * fs] += 1.5 * torch.randn(20 * fs, generator=torch.Generator().manual_seed(2))  # 40-60 s: noise
    src = write_parquet({"ecg": x}, tmp_path / "e.parquet", sampling_rate=fs)
    out = tmp_path / "run"
    result = run("beats", src, "--out", out, "--mode", "centered")
    assert result.exit_code == 0, result.output
    q = json.loads((out / "summary.json").read_text())["quality"]
    assert q["unusable_stretches_s"] == [[40.0, 60.0]], q  # the noise, and nothing else
    assert q["unusable_s"] == 20.0 and q["unusable_share"] == pytest.approx(20 / 120)
    # ectopic beats are not poor signal: counted apart, as unlike the typical beat
    peaks = pq.read_table(out / "beats.parquet").column("peak").to_numpy()
    in_noise = (peaks >= 40 * fs) & (peaks < 60 * fs)
    ectopic = sim.r_peaks.numpy()[sim.symbols == "V"]
    clean_ectopic = int(((ectopic < 40 * fs) | (ectopic >= 60 * fs)).sum())
    # (and the one normal beat whose window reaches into the noise from before it)
    assert clean_ectopic >= 5 and clean_ectopic <= q["beats_unlike_typical"] <= clean_ectopic + 1
    assert q["beats_poor"] == int(in_noise.sum())  # the beats in the noise, and no other
    assert (out / "quality.png").stat().st_size > 10_000
    assert "quality.png" in (out / "report.html").read_text()
