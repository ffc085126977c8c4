"""Never wrong in silence: non-finite samples, impossible rates, settings the beats contradict,
training that diverges, strict JSON, and fixes that name options that exist."""

import ast
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from one_line import one_line_error
from typer.main import get_command
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.core.errors import CLI_NAMES, TOKEN, DevicepipeError, ReadError
from devicepipe.ecg import ecg_peaks, evaluate_beats
from devicepipe.simulate import simulate_ecg, write_simulated_ecg

runner = CliRunner()
SRC = Path(__file__).resolve().parents[2] / "src" / "devicepipe"


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def spoiled(tmp_path):
    """A simulated 3-minute ECG as CSV with an inf, a value beyond float32 and a NaN written into it."""
    sim = simulate_ecg(180, 250, seed=4)
    _, truth = write_simulated_ecg(sim, tmp_path / "clean.csv")
    lines = (tmp_path / "clean.csv").read_text().splitlines()
    for row, text in ((1001, "inf"), (20001, "1e39"), (30001, "nan")):  # +1: the header
        lines[row] = text
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "bad.csv", truth, sim


def test_non_finite_samples_are_an_error_naming_count_and_first_position(spoiled, tmp_path):
    bad, _, _ = spoiled
    one_line_error(run("read", bad, "--sampling-rate", 250), "3 non-finite value(s)", "the first at sample 1,000")
    result = run("beats", bad, "--sampling-rate", 250, "--out", tmp_path / "r")
    one_line_error(result, "1 NaN or empty, 2 infinite", "--nan drop or --nan interpolate")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("policy", ["interpolate", "drop"])
def test_one_bad_sample_leaves_every_other_beat_found(spoiled, tmp_path, policy):
    bad, truth, sim = spoiled
    result = run("beats", bad, "--sampling-rate", 250, "--out", tmp_path / "r", "--nan", policy)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["non_finite_values"] == {"count": 3, "policy": policy}
    peaks = np.loadtxt(tmp_path / "r" / "beats.csv", delimiter=",", skiprows=1, usecols=0)
    score = evaluate_beats(sim.r_peaks.numpy(), peaks, 250, n_samples=sim.signal.numel())
    assert score.f1 >= 0.99, score  # dropping three samples moves later beats by at most 3 samples


def test_the_detector_refuses_non_finite_input_instead_of_finding_nothing():
    x = simulate_ecg(60, 250, seed=0).signal.clone()
    x[777] = float("nan")
    with pytest.raises(DevicepipeError, match="1 non-finite value.*sample 777"):
        ecg_peaks(x, 250)
    with pytest.raises(DevicepipeError, match="finite, positive"):
        ecg_peaks(x.nan_to_num(), float("inf"))


@pytest.mark.parametrize("rate", ["inf", "nan", "0"])
def test_an_impossible_sampling_rate_is_refused(tmp_path, rate):
    (tmp_path / "x.csv").write_text("a\n1\n2\n3\n")
    one_line_error(run("read", tmp_path / "x.csv", "--sampling-rate", rate), "--sampling-rate must be a finite")


def test_a_wrong_sampling_rate_is_a_warning_and_strict_refuses(tmp_path):
    sim = simulate_ecg(180, 250, seed=5)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.csv")
    # the recording is 250 Hz: at 25 Hz it reads as 30 minutes in which no beat is found
    rate, says = 25, "0 beat(s) found in 30.0 minutes"
    result = run("beats", src, "--sampling-rate", rate, "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert says in result.stderr and f"sampling rate of {rate} Hz" in result.stderr, result.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    # (25 Hz is also under the rate at which beats are found at all: said first)
    assert len(summary["warnings"]) == 2 and says in summary["warnings"][1]
    assert "the sampling rate of 25 Hz is under 30 Hz, below which beats are missed" in summary["warnings"][0]
    strict = run("beats", src, "--sampling-rate", rate, "--out", tmp_path / "s", "--strict")
    one_line_error(strict, "the sampling rate of 25 Hz is under 30 Hz", "nothing was written")
    assert not (tmp_path / "s").exists()


def test_heart_rates_no_heart_has_are_named():
    from devicepipe.pipelines import rate_warnings

    beats_every = np.arange(0, 600_000, 100)  # every 100 samples
    assert rate_warnings(beats_every, 250, 600_000) == []  # 150 bpm
    slow = rate_warnings(beats_every, 25, 600_000)  # 15 bpm
    assert len(slow) == 2 and "median heart rate is 15 bpm" in slow[1] and "25 Hz is most likely wrong" in slow[1]
    assert slow[0].startswith("the sampling rate of 25 Hz is under 30 Hz")  # (the rate itself: said first)
    fast = rate_warnings(beats_every, 1000, 600_000)  # 600 bpm
    assert "600 bpm" in fast[0]
    assert rate_warnings(np.array([5]), 250, 250 * 30) == []  # half a minute without beats says little
    assert "1 beat(s) found in 2.0 minutes" in rate_warnings(np.array([5]), 250, 250 * 120)[0]
    # a rate under the detector's floor (tests/unit/test_ecg.py measures it), whatever the beats say
    assert rate_warnings(np.arange(0, 6000, 29), 29, 6000)[0].startswith("the sampling rate of 29 Hz is under 30 Hz")
    assert rate_warnings(np.arange(0, 6000, 30), 30, 6000) == []


def test_a_recording_sampled_too_slowly_for_a_heartbeat_is_refused_by_the_ecg_commands(tmp_path):
    # a load series (a sample an hour) given to an ECG command: it had written a run of 0 beats
    # (beats), or said a beat's window held 0 samples (ecg, score)
    src = tmp_path / "load.csv"
    assert run("simulate", "load", "--days", 30, "--out", src).exit_code == 0
    for command in ("beats", "ecg"):
        one_line_error(
            run(command, src, "--out", tmp_path / command),
            "load.csv holds a sample every 1.00 h (0.000277778 Hz), too few to see a heartbeat",
            "is it a load series (devicepipe series)?",
        )
        assert not (tmp_path / command).exists()


def test_a_table_whose_times_are_numbers_says_the_rate_they_make(tmp_path):
    # a column of elapsed times in numbers (seconds or milliseconds) is not read as times, so the
    # rate is unknown: the error had said only "e.g. --sampling-rate 250"; it now names the
    # column, its step and the rate that step makes in a unit an ECG can be sampled in
    sim = simulate_ecg(20, 360, seed=1)
    x = sim.signal.numpy()
    t = np.arange(x.size) / 360
    for name, times, says in (("s.csv", t, "--sampling-rate 360 if those are seconds"),
                              ("ms.parquet", 1000 * t, "--sampling-rate 360 if those are milliseconds")):  # fmt: skip
        frame = pd.DataFrame({"time": times, "ecg": x})
        frame.to_csv(tmp_path / name, index=False) if name.endswith(".csv") else frame.to_parquet(tmp_path / name)
        for command in ("beats", "ecg"):
            one_line_error(
                run(command, tmp_path / name, "--out", tmp_path / command), "its column 'time' rises by", says
            )
            assert not (tmp_path / command).exists()
    # sample numbers say nothing of the rate: the plain fix
    pd.DataFrame({"sample": np.arange(x.size), "ecg": x}).to_csv(tmp_path / "n.csv", index=False)
    one_line_error(run("beats", tmp_path / "n.csv", "--out", tmp_path / "o"), "unknown; pass --sampling-rate HZ")


def test_summary_json_is_strict_json(tmp_path):
    sim = simulate_ecg(120, 250, seed=6)  # two minutes: SDANN over 5-minute segments is undefined
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    assert run("beats", src, "--out", tmp_path / "r").exit_code == 0
    text = (tmp_path / "r" / "summary.json").read_text()

    def refuse(constant):
        raise AssertionError(f"bare {constant} in summary.json")

    summary = json.loads(text, parse_constant=refuse)
    assert summary["heart_rate"]["sdann_ms"] is None


def test_training_on_nan_is_refused_and_a_step_too_large_stops():
    from devicepipe.learning.ensemble import fit_ensemble
    from devicepipe.models import MLPAutoencoder, MLPAutoencoderConfig

    def make(seed):
        torch.manual_seed(seed)
        return MLPAutoencoder(MLPAutoencoderConfig(input=8, sigmoid_output=False))

    x = torch.rand(200, 8, generator=torch.Generator().manual_seed(0))
    ens = fit_ensemble(make, x * 1000, members=3, epochs=5, lr=1e6)  # a step too large: stopped, said
    assert all(h.diverged for h in ens.histories)
    x[3, 2] = float("nan")
    with pytest.raises(DevicepipeError, match="non-finite value.*NaN or inf in the input.*row 3"):
        fit_ensemble(make, x, members=2, epochs=2)


def test_every_option_a_message_suggests_exists():
    options = set()
    group = get_command(app)

    def collect(command):
        for param in getattr(command, "params", []):
            options.update(o for o in param.opts if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            collect(sub)

    collect(group)
    named = set()  # every setting a library message names: tokens of its fix, its param when the problem says it
    for path in SRC.rglob("*.py"):
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", "").endswith("Error")):
                continue
            words = {k.arg: _text(k.value) for k in call.keywords}
            named.update(m.group(1) for m in TOKEN.finditer(words.get("fix") or ""))
            problem = _text(call.args[0]) if call.args else ""
            if "{param}" in problem and words.get("param"):
                named.add(words["param"])
    assert {"sampling_rate", "out", "workers", "time_format"} <= named, named  # the scan finds them
    flags = {name: {"--" + n.replace("_", "-") for n in CLI_NAMES.get(name, (name,))} for name in named}
    missing = {name: f for name, f in flags.items() if not f & options}
    assert not missing, missing


def _text(node: ast.AST) -> str:
    """The literal text of a string or f-string node (its formatted parts left out)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) for v in node.values)
    if isinstance(node, ast.BinOp):
        return _text(node.left) + _text(node.right)
    return ""


def test_a_message_names_each_setting_as_its_reader_writes_it():
    from devicepipe.core.errors import DevicepipeError, render

    error = DevicepipeError(
        "read_series(): {param} is unknown", fix="pass {sampling_rate=HZ} or {time_format='%d/%m %H'}; {resume=True}",
        param="sampling_rate", value=None,
    )  # fmt: skip
    assert str(error) == (
        "read_series(): sampling_rate is unknown; pass sampling_rate=HZ or time_format='%d/%m %H'; resume=True"
    )
    assert (
        error.cli_message == "--sampling-rate is unknown; pass --sampling-rate HZ or --time-format '%d/%m %H'; --resume"
    )
    # read_series' column is an ECG command's --channel and the series command's --column
    assert render("{column=}", cli=True, options={"--channel", "--out"}) == "--channel"
    assert render("{column=}", cli=True, options={"--column", "--channel"}) == "--column"
    assert DevicepipeError("a {x}.csv").cli_message == "a {x}.csv"  # a problem's own text stays as it is


def test_day_and_month_order_is_taken_from_the_data_or_asked_for(tmp_path):
    from devicepipe.io import read_series

    def stamps(rec):
        return rec.timestamps.numpy().view("datetime64[ns]").astype("datetime64[m]").astype(str).tolist()

    certain = tmp_path / "dmy.csv"  # 13 can only be a day
    certain.write_text("Datetime,load\n12/01/2020 23:00,5\n13/01/2020 00:00,6\n13/01/2020 01:00,7\n")
    assert stamps(read_series(certain, "load", time_column="Datetime")) == [
        "2020-01-12T23:00",
        "2020-01-13T00:00",
        "2020-01-13T01:00",
    ]
    ambiguous = tmp_path / "amb.csv"  # 01/02: the 1st of February or the 2nd of January?
    ambiguous.write_text("Datetime,load\n01/02/2020 00:00,5\n01/02/2020 01:00,6\n01/02/2020 02:00,7\n")
    args = ["read", ambiguous, "--time-column", "Datetime", "--column", "load"]
    one_line_error(run(*args), "could be day first or month first", "--time-format '%d/%m/%Y %H:%M'")
    assert run(*args, "--time-format", "%d/%m/%Y %H:%M").exit_code == 0
    rec = read_series(ambiguous, "load", time_column="Datetime", time_format="%d/%m/%Y %H:%M")
    assert stamps(rec)[0] == "2020-02-01T00:00"


def test_iso_times_with_offsets_are_read_as_utc(tmp_path):
    from devicepipe.io import read_series

    src = tmp_path / "off.csv"
    src.write_text(
        "Datetime,v\n2020-01-01T00:00:00+02:00,1\n2020-01-01T01:00:00+02:00,2\n2020-01-01T02:30:00+01:00,3\n"
    )
    rec = read_series(src, "v", time_column="Datetime")
    expected = np.array(["2019-12-31T22:00", "2019-12-31T23:00", "2020-01-01T01:30"], dtype="datetime64[ns]")
    np.testing.assert_array_equal(rec.timestamps.numpy().view("datetime64[ns]"), expected)
    # on the wall clock where they were written: the times less their offsets (a load series' days)
    wall = read_series(src, "v", time_column="Datetime", wall_clock=True)
    written = np.array(["2020-01-01T00:00", "2020-01-01T01:00", "2020-01-01T02:30"], dtype="datetime64[ns]")
    np.testing.assert_array_equal(wall.timestamps.numpy().view("datetime64[ns]"), written)
    # the same with the empty lines that end a file, offsets without a colon, and Z for UTC
    src.write_text("Datetime,v\n2020-01-01T00:00:00+0200,1\n2020-01-01T01:00:00Z,2\n\n\n")
    wall = read_series(src, "v", time_column="Datetime", wall_clock=True)
    np.testing.assert_array_equal(wall.timestamps.numpy().view("datetime64[ns]"), written[:2])
    np.testing.assert_array_equal(
        read_series(src, "v", time_column="Datetime").timestamps.numpy().view("datetime64[ns]"),
        np.array(["2019-12-31T22:00", "2020-01-01T01:00"], dtype="datetime64[ns]"),
    )
    # times some with offsets and some without are no one kind of time: the reading error as before
    src.write_text("Datetime,v\n2020-01-01T00:00:00+02:00,1\n2020-01-01T01:00:00,2\n")
    with pytest.raises(ReadError, match="Datetime"):
        read_series(src, "v", time_column="Datetime")


def test_times_with_a_zone_read_on_its_wall_clock_across_a_change_of_daylight_saving_time(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from devicepipe.io import read_series

    # Berlin's clocks went from 02:00 to 03:00 on 2023-03-26: hourly instants, and their local times
    instants = pd.date_range("2023-03-26T00:00", periods=4, freq="h", tz="Europe/Berlin")
    local = ["2023-03-26T00:00", "2023-03-26T01:00", "2023-03-26T03:00", "2023-03-26T04:00"]
    utc = ["2023-03-25T23:00", "2023-03-26T00:00", "2023-03-26T01:00", "2023-03-26T02:00"]
    pq.write_table(pa.table({"t": pa.array(instants), "v": [1.0, 2.0, 3.0, 4.0]}), tmp_path / "berlin.parquet")
    frame = pd.DataFrame({"v": [1.0, 2.0, 3.0, 4.0]}, index=instants)
    for source in (tmp_path / "berlin.parquet", frame, frame["v"]):
        kw = {"time_column": "t"} if isinstance(source, Path) else {}
        for wall_clock, expected in ((False, utc), (True, local)):
            rec = read_series(source, None if isinstance(source, pd.Series) else "v", wall_clock=wall_clock, **kw)
            got = rec.timestamps.numpy().view("datetime64[ns]")
            np.testing.assert_array_equal(got, np.array(expected, dtype="datetime64[ns]"), err_msg=str(type(source)))


def test_what_a_killed_run_leaves_is_swept_by_the_next(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "run"
    out.mkdir()
    # a run killed while writing a file and while staging a directory
    script = (
        "import os, signal\n"
        "from devicepipe.io import atomic_path, staged_dir\n"
        f"with staged_dir({str(out)!r}) as stage:\n"
        "    (stage / 'beats.csv').write_text('half')\n"
        f"    with atomic_path({str(out / 'summary.json')!r}) as tmp:\n"
        "        tmp.write_text('{')\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=False)
    left = [p.name for p in out.iterdir()] + [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    assert any(n.endswith(".tmp") for n in left) and any(n.endswith(".partial") for n in left), left
    sim = simulate_ecg(60, 250, seed=2)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    result = run("beats", src, "--out", out)
    assert result.exit_code == 0, result.output
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_a_blank_line_is_never_dropped_in_silence(tmp_path):
    src = tmp_path / "blank.csv"
    src.write_text("ecg\n1\n2\n\n3\n4\n")
    one_line_error(run("read", src, "--sampling-rate", 1), "1 NaN or empty", "the first at sample 2")
    from devicepipe.io import read_series

    assert read_series(src, sampling_rate=1, nan="drop").samples.tolist() == [1, 2, 3, 4]


def test_running_out_of_memory_is_one_line(tmp_path):
    import subprocess
    import sys

    # the CLI in a process whose address space may grow by only 400 MB once torch is loaded and
    # has probed for CUDA: with a CUDA build of torch, the probe maps the driver's libraries, which
    # under the limit fail and print torch's own warning (a second line that is not ours)
    script = (
        "import re, resource, sys\n"
        "import torch\n"
        "torch.cuda.is_available()\n"
        "from devicepipe.cli import main\n"
        "vm = int(re.search(r'VmSize:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + 400 * 2**20, resource.RLIM_INFINITY))\n"
        "sys.argv = ['devicepipe', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = ["simulate", "ecg", "--duration", "300h", "--sampling-rate", "1000", "--out", str(tmp_path / "big.csv")]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # host memory: a CUDA context cannot start under RLIMIT_AS
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("devicepipe: error: out of memory on this machine (asked for ")
    assert "a shorter --duration" in lines[0] and not list(tmp_path.iterdir())  # the fix simulate has


@pytest.mark.parametrize(
    ("command", "fixes", "not_named"),
    [
        (["beats", "x.csv"], ["--chunk 10min", "a smaller --memory-budget", "--device cpu"], ["--batch-size"]),
        (["train", "x"], ["a smaller --memory-budget", "a smaller --batch-size", "--device cpu"], ["--chunk"]),
        (["ecg", "x.csv"], ["a smaller --batch-size", "--device cpu"], ["--chunk", "--memory-budget"]),
    ],
)
def test_out_of_memory_on_a_gpu_names_the_fixes_each_command_has(monkeypatch, tmp_path, command, fixes, not_named):
    # the GPU's own error, raised where the command starts its work (no GPU needed to test the message)
    def exhausted(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.19 GiB total)")

    from devicepipe.cli.commands import beats, ecg, train

    for module, name in ((beats, "run_beats"), (train, "run_train"), (ecg, "run_ecg")):
        monkeypatch.setattr(module, name, exhausted)
    (tmp_path / "x.csv").write_text("v\n" + "\n".join(["0.1"] * 2000) + "\n")
    args = [command[0], str(tmp_path / command[1]), "--out", str(tmp_path / "out")]
    args += [] if command[0] == "train" else ["--sampling-rate", "250"]
    result = run(*args)
    one_line_error(result, "out of memory on the GPU (asked for 2.00 GiB)", *fixes)
    line = result.stderr.strip()
    assert not any(option in line for option in not_named), line
    named = set(re.findall(r"--[a-z][a-z-]+", line))
    options = {o for p in get_command(app).commands[command[0]].params for o in getattr(p, "opts", [])}
    assert named <= options, named - options  # every option it names is one the command has
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["output", "temporary files", "model", "beside an earlier run"])
def test_a_full_disk_is_one_line_and_leaves_nothing(monkeypatch, tmp_path, where):
    import contextlib
    import errno

    from devicepipe.core import spill
    from devicepipe.io import write

    sim = simulate_ecg(180, 250, seed=2)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.npy")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "somewhere"))

    if where == "output":  # the beat matrix, the first file a run writes
        monkeypatch.setattr("devicepipe.pipelines.beats_finish.write_npy", full)
        result = run("beats", src, "--sampling-rate", "250", "--out", tmp_path / "out", "--no-figures")
        one_line_error(result, "the disk is full: No space left on device", "free space or choose an --out")
    elif where == "temporary files":  # a chunked run's beats, waiting in TMPDIR
        monkeypatch.setattr(spill.Spill, "_new_file", lambda self, name: open("/dev/full", "r+b", buffering=0))  # noqa: SIM115
        result = run("beats", src, "--sampling-rate", "250", "--out", tmp_path / "out", "--chunk", "1min")
        one_line_error(result, "cannot write temporary files in ", "No space left on device", "set TMPDIR")
    else:  # the model, after the beat files and figures were written: torch's own writer fails otherwise
        atomic = write.atomic_path

        @contextlib.contextmanager
        def full_for_models(path):
            if str(path).endswith(".pt"):
                yield Path("/dev/full")  # every write there fails with ENOSPC
            else:
                with atomic(path) as tmp:
                    yield tmp

        monkeypatch.setattr(write, "atomic_path", full_for_models)
        if where == "beside an earlier run":
            (tmp_path / "out").mkdir()
            (tmp_path / "out" / "notes.txt").write_text("mine")
        result = run("ecg", src, "--sampling-rate", "250", "--out", tmp_path / "out", "--epochs", "1")
        one_line_error(result, "the disk is full: No space left on device", "free space or choose an --out")
        if where == "beside an earlier run":  # what was there stays, what the run added goes
            assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]
            return
    assert not (tmp_path / "out").exists()


def test_a_reference_that_is_not_one_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "rnd.atr").write_bytes(rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    sim = simulate_ecg(60, 250, seed=1)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    one_line_error(run("beats", src, "--out", tmp_path / "r", "--reference", tmp_path / "rnd.atr"), "rnd.atr")
    # a real reference of another, longer recording: its beats run past this one's end
    long_sim = simulate_ecg(120, 250, seed=1)
    _, long_truth = write_simulated_ecg(long_sim, tmp_path / "long.parquet")
    one_line_error(run("beats", src, "--out", tmp_path / "r", "--reference", long_truth), "past the end of")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("content", "args", "pattern"),
    [
        (b"a,a\n1,2\n3,4\n", [], "names more than one column 'a'"),
        (b",x\n1,2\n,3\n", ["-c", "x"], None),  # an unnamed column beside the chosen one is fine ...
        (b",,x\n1,2,3\n", ["-c", "x"], "more than one column '' (an empty header cell)"),  # ... two are not
        (bytes(range(256)) * 40, [], "holds binary data"),
        (b"ecg_\xe9\n1\n2\n", [], "is not UTF-8 text (byte 4 is 0xe9); pass its encoding, e.g. --encoding latin-1"),
        (b"1.0," * 20_000 + b"1.0\n", [], "more than 10,000 fields"),
        (b"ecg\r1\r2\r3\r", [], None),  # old Mac line endings
    ],
)
def test_troublesome_csv_files_end_in_one_line(tmp_path, content, args, pattern):
    src = tmp_path / "x.csv"
    src.write_bytes(content)
    result = run("read", src, "--sampling-rate", 100, *args)
    if pattern is None:
        assert result.exit_code == 0, result.output
    else:
        one_line_error(result, pattern)


def test_text_encodings_are_read(tmp_path):
    from devicepipe.io import read_series

    values = [1.5, 2.5, -3.0]
    text = "ecg\n" + "\n".join(map(str, values)) + "\n"
    for i, data in enumerate([("\ufeff" + text).encode("utf-8"), text.encode("utf-16")]):  # a BOM; UTF-16
        path = tmp_path / f"enc-{i}.csv"
        path.write_bytes(data)
        rec = read_series(path, sampling_rate=1)
        assert rec.channels == ("ecg",) and rec.samples.tolist() == values
    latin = tmp_path / "latin.csv"
    latin.write_bytes(("décès\n" + "\n".join(map(str, values)) + "\n").encode("latin-1"))
    rec = read_series(latin, sampling_rate=1, encoding="latin-1")
    assert rec.channels == ("décès",) and rec.samples.tolist() == values


def test_more_mistakes_end_in_one_line(tmp_path):
    (tmp_path / "eq.csv").write_text("Datetime,v\n2020-01-01 00:00,1\n2020-01-01 00:00,2\n")
    one_line_error(run("series", tmp_path / "eq.csv", "-c", "v", "--out", tmp_path / "r"), "has no time step")
    one_line_error(run("simulate", "ecg", "--duration", "1ms", "--out", tmp_path / "s.csv"), "no whole beat")
    one_line_error(run("simulate", "ecg", "--duration", "inf", "--out", tmp_path / "s.csv"), "cannot read duration")
    (tmp_path / "dir.csv").mkdir()
    one_line_error(run("simulate", "ecg", "--duration", "1min", "--out", tmp_path / "dir.csv"), "is a directory")
    (tmp_path / "locked").mkdir(mode=0o500)
    if not os.access(tmp_path / "locked", os.W_OK):  # root may write anywhere
        one_line_error(run("beats", tmp_path / "eq.csv", "--out", tmp_path / "locked" / "r"), "cannot write in")
    one_line_error(run("simulate", "ecg", "--duration", "1min", "--out", "/proc/devicepipe/s.csv"), "cannot write")
    one_line_error(run("ecg", tmp_path / "eq.csv", "--out", "/proc/devicepipe/r"), "cannot write in /proc")


class _Payload:
    """Stands for code a foreign checkpoint could carry."""

    def __reduce__(self):
        return (print, ("this ran",))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path, capfd):
    from devicepipe.learning.train import load_checkpoint

    torch.save({"epoch": 3, "payload": _Payload()}, tmp_path / "checkpoint.pt")
    with pytest.raises(DevicepipeError, match="cannot read checkpoint .* more than tensors and plain data"):
        load_checkpoint(tmp_path)
    assert "this ran" not in capfd.readouterr().out


def test_resume_refuses_another_run(tmp_path):
    for seed, name in ((0, "a.parquet"), (1, "b.parquet")):
        write_simulated_ecg(simulate_ecg(90, 250, seed=seed), tmp_path / name)
    out = tmp_path / "run"
    first = run("ecg", tmp_path / "a.parquet", "--out", out, "--epochs", 3, "--device", "cpu")
    assert first.exit_code == 0, first.output
    before = (out / "checkpoint.pt").read_bytes()
    again = ["ecg", tmp_path / "a.parquet", "--out", out, "--device", "cpu", "--resume"]
    one_line_error(run(*again, "--epochs", 5, "--seed", 1), "this is not the run it holds (seed 0 then, 1 now)")
    one_line_error(run(*again, "--epochs", 5, "--lr", 0.01), "lr 0.003 then, 0.01 now")
    other = ["ecg", tmp_path / "b.parquet", *again[2:]]
    one_line_error(run(*other, "--epochs", 5), "this is not the run it holds (input ")
    one_line_error(run(*again, "--epochs", 2), "has trained 3 epochs already", "--epochs above 3")
    assert (out / "checkpoint.pt").read_bytes() == before  # nothing was trained or written
    # the beats trained on, chosen by --min-quality: given then and dropped now, or the reverse
    kept = tmp_path / "kept"
    assert run("ecg", tmp_path / "a.parquet", "--out", kept, "--epochs", 3, "--min-quality", 0.5).exit_code == 0
    one_line_error(
        run("ecg", tmp_path / "a.parquet", "--out", kept, "--epochs", 5, "--resume"), "min_quality 0.5 then, None now"
    )
    assert run(*again, "--epochs", 5).exit_code == 0


def test_a_parquet_rate_that_is_no_number_is_named(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"x": [1.0, 2.0, 3.0]}).replace_schema_metadata({b"devicepipe.sampling_rate": b"abc"})
    pq.write_table(table, tmp_path / "m.parquet")
    one_line_error(run("read", tmp_path / "m.parquet"), "sampling rate of m.parquet must be a finite", "nan")
    assert "pass --sampling-rate" in run("read", tmp_path / "m.parquet").stderr
    assert run("read", tmp_path / "m.parquet", "--sampling-rate", 100).exit_code == 0  # a rate given wins


def test_a_damaged_parquet_page_is_an_error_not_garbage(tmp_path):
    from devicepipe.io import read_series, write_parquet

    path = write_parquet({"ecg": np.sin(np.arange(100_000) / 10).astype(np.float32)}, tmp_path / "e.parquet")
    assert read_series(path, sampling_rate=250).n_samples == 100_000
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte inside the column's data pages
    path.write_bytes(bytes(data))
    one_line_error(run("read", path, "--sampling-rate", 250), "e.parquet is damaged", "CRC")


@pytest.mark.parametrize("command", ["beats", "ecg"])
def test_every_ecg_command_takes_the_encoding(tmp_path, command):
    sim = simulate_ecg(60, 250, seed=3)
    src = tmp_path / "latin.csv"
    src.write_bytes(("ecg_\xe9\n" + "\n".join(f"{v:.5f}" for v in sim.signal.tolist()) + "\n").encode("latin-1"))
    args = [command, src, "--sampling-rate", 250, "--out", tmp_path / "r"]
    if command == "ecg":
        args += ["--epochs", 1]
    one_line_error(run(*args), "pass its encoding, e.g. --encoding latin-1")
    result = run(*args, "--encoding", "latin-1")
    assert result.exit_code == 0, result.output
    peaks = np.loadtxt(tmp_path / "r" / "beats.csv", delimiter=",", skiprows=1, usecols=0)
    assert evaluate_beats(sim.r_peaks.numpy(), peaks, 250, n_samples=sim.signal.numel()).f1 >= 0.99


def test_a_time_format_that_does_not_fit_is_named(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("Datetime,v\n2020-01-01 00:00,1\n2020-01-01 01:00,2\n")
    result = run("read", src, "--time-column", "Datetime", "--column", "v", "--time-format", "%d/%m/%Y")
    one_line_error(result, "check --time-format %d/%m/%Y (e.g.")


def test_a_path_too_long_for_the_file_system_is_one_line(tmp_path):
    import subprocess
    import sys

    long = "x" * 300  # longer than any file system's name (255 bytes)
    sim = tmp_path / "sim.parquet"
    write_simulated_ecg(simulate_ecg(10, 250, seed=1), sim)
    for args in (
        ["beats", sim, "--out", tmp_path / long, "--no-figures"],
        ["beats", tmp_path / f"{long}.parquet", "--out", tmp_path / "r", "--no-figures"],
        ["read", tmp_path / f"{long}.csv"],
        ["ecg", tmp_path / long / "*.hea", "--out", tmp_path / "r"],
    ):
        one_line_error(run(*args), "a path is too long for the file system (", "...); give a shorter one.")
        assert not (tmp_path / "r").exists()
    # the command line itself (its first look at the input runs before the error handling)
    args = ["beats", str(tmp_path / f"{long}.parquet"), "--out", str(tmp_path / "r")]
    proc = subprocess.run([sys.executable, "-m", "devicepipe", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert "too long for the file system" in proc.stderr and not (tmp_path / "r").exists()


def test_a_pattern_the_shell_expanded_is_one_line_saying_to_quote_it(tmp_path):
    paths = []
    for i in range(4):
        src, _ = write_simulated_ecg(simulate_ecg(20, 250, seed=i), tmp_path / f"r{i}.parquet")
        paths.append(str(src))
    result = run("beats", *paths, "--out", tmp_path / "o")  # what `beats DIR/*.parquet` becomes unquoted
    one_line_error(
        result, "4 inputs where one goes", "quote it", f"'{tmp_path}/*.parquet'", f"give the folder ({tmp_path})"
    )
    assert str(paths[2]) not in result.stderr and not (tmp_path / "o").exists()
    one_line_error(run("beats", paths[0], "stray", "--out", tmp_path / "o"), "unexpected extra argument")  # not paths


def test_a_reference_without_beat_annotations_is_refused(tmp_path):
    import wfdb

    sim = simulate_ecg(60, 250, seed=1)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    peaks = sim.r_peaks.numpy()
    wfdb.wrann("r", "atr", peaks[::5], ["~"] * len(peaks[::5]), write_dir=str(tmp_path))  # noise marks only
    wfdb.wrann("r", "rhy", np.array([10, 5000]), ["+", "+"], aux_note=["(N", "(AFIB"], write_dir=str(tmp_path))
    for ref, others in (("r.atr", len(peaks[::5])), ("r.rhy", 2)):
        for command in ("beats", "ecg"):
            result = run(command, src, "--out", tmp_path / "o", "--reference", tmp_path / ref)
            one_line_error(result, f"{ref} holds no beat annotations", f"it has {others} other annotation")
            assert not (tmp_path / "o").exists()


def test_a_table_timed_by_its_time_column_alone_read_in_chunks_asks_for_the_rate(tmp_path):
    sim = simulate_ecg(120, 250, seed=3)
    times = pd.date_range("2024-01-01", periods=sim.signal.numel(), freq="4ms").strftime("%Y-%m-%d %H:%M:%S.%f")
    pd.DataFrame({"time": times, "ecg": sim.signal.numpy()}).to_csv(tmp_path / "timed.csv", index=False)
    assert run("beats", tmp_path / "timed.csv", "--out", tmp_path / "whole").exit_code == 0  # in one piece: read
    refused = run("beats", tmp_path / "timed.csv", "--out", tmp_path / "c", "--chunk", "1min")
    one_line_error(
        refused, "read in chunks, and its rate is in its time column 'time' alone", "say 250 Hz", "--sampling-rate"
    )
    assert not (tmp_path / "c").exists()
    given = run("beats", tmp_path / "timed.csv", "--out", tmp_path / "g", "--chunk", "1min", "--sampling-rate", "250")
    assert given.exit_code == 0, given.output
    whole = json.loads((tmp_path / "whole" / "summary.json").read_text())
    chunked = json.loads((tmp_path / "g" / "summary.json").read_text())
    assert whole["counts"]["beats_found"] == chunked["counts"]["beats_found"] > 100


@pytest.mark.parametrize("fmt", ["16", "212"])
def test_a_wfdb_signal_file_cut_short_is_named_with_both_sizes(tmp_path, fmt):
    # the plain reader handed a short file to wfdb, whose read failed with "operands could not be
    # broadcast together with shapes (334,) (333,)": nothing about the file
    import wfdb

    sim = simulate_ecg(60, 250, seed=4)
    digital = np.round(sim.signal.numpy() * 200).astype(np.int32)[:, None]
    wfdb.wrsamp("cut", fs=250, units=["mV"], sig_name=["II"], d_signal=digital, fmt=[fmt], adc_gain=[200.0],
                baseline=[0], write_dir=str(tmp_path))  # fmt: skip
    whole = (tmp_path / "cut.dat").stat().st_size
    (tmp_path / "cut.dat").write_bytes((tmp_path / "cut.dat").read_bytes()[:1000])
    for command, extra in (("read", ()), ("beats", ()), ("beats", ("--chunk", "10s")), ("ecg", ())):
        out = () if command == "read" else ("--out", tmp_path / f"o_{command}")
        refused = run(command, tmp_path / "cut", *out, *extra)
        one_line_error(refused, "cut.dat holds 1,000 bytes", f"{whole:,} bytes", "cut short")
        assert not (tmp_path / f"o_{command}").exists()


def test_crashes_of_the_audit_end_in_one_line(tmp_path, monkeypatch):
    """Each of these ended in a traceback (or a segfault) in one command or another; now one line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sim = simulate_ecg(60, 250, seed=4)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    # a damaged Parquet file and an empty WFDB header, in beats as in read and ecg (the probes before the read)
    (tmp_path / "cut.parquet").write_bytes(src.read_bytes()[:20_000])
    (tmp_path / "empty.hea").write_text("")
    for command in ("beats", "read", "ecg"):
        out = () if command == "read" else ("--out", tmp_path / f"o_{command}")
        one_line_error(run(command, tmp_path / "cut.parquet", *out), "cut.parquet", "Parquet")
        one_line_error(run(command, tmp_path / "empty", *out), "empty.hea", "no record line")
    # duplicate column names (the channel choice read them by name)
    (tmp_path / "dup.csv").write_text("a,a\n" + "\n".join(f"{v},{v}" for v in sim.signal.numpy()[:3000]))
    one_line_error(run("beats", tmp_path / "dup.csv", "--sampling-rate", 250, "--out", tmp_path / "d"), "'a'")
    # an encoding Python does not know
    one_line_error(
        run("beats", tmp_path / "dup.csv", "--sampling-rate", 250, "--encoding", "nonsense", "--out", tmp_path / "n"),
        "unknown text encoding 'nonsense'",
        "--encoding utf-8",
    )
    # far more threads than the machine runs (PyTorch's pool segfaulted), asked for or in the environment
    one_line_error(run("ecg", src, "--threads", 100_000, "--out", tmp_path / "t"), "--threads 100,000", "at most")
    monkeypatch.setenv("DEVICEPIPE_THREADS", "100000")
    one_line_error(run("ecg", src, "--out", tmp_path / "t"), "DEVICEPIPE_THREADS='100000'")
    monkeypatch.delenv("DEVICEPIPE_THREADS")
    assert not any((tmp_path / name).exists() for name in ("o_beats", "o_ecg", "d", "n", "t"))
    # a float16 column: read (the damage check compares it with the minimum and maximum Parquet records
    # for it, which pyarrow gives as two bytes), and a page changed out of that range still refused
    half = sim.signal.numpy().astype(np.float16)
    pq.write_table(pa.table({"ecg": half}), tmp_path / "half.parquet")
    made = run("beats", tmp_path / "half.parquet", "--sampling-rate", 250, "--out", tmp_path / "h", "--no-figures")
    assert made.exit_code == 0, made.output
    assert run("beats", src, "--out", tmp_path / "w", "--no-figures").exit_code == 0
    counts = [json.loads((tmp_path / d / "summary.json").read_text())["counts"]["beats_found"] for d in ("h", "w")]
    assert counts[0] == counts[1] > 50
    from devicepipe.io.tables import _stat

    assert _stat(np.float16(1.5).tobytes(), pa.float16()) == 1.5 and _stat(b"\x00", pa.float16()) is None
    assert _stat(2.0, pa.float32()) == 2.0 and _stat(True, pa.bool_()) is None


def test_a_model_file_trained_with_more_threads_than_this_machine_has_still_loads(tmp_path):
    from devicepipe.anomaly import load_model
    from devicepipe.anomaly.model_format import content_digest
    from devicepipe.core.threads import most_threads

    sim = simulate_ecg(120, 250, seed=2)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    assert run("ecg", src, "--epochs", 2, "--out", tmp_path / "m", "--threads", 1).exit_code == 0
    state = torch.load(tmp_path / "m" / "model.pt", weights_only=True)
    state["params"]["threads"] = 100_000  # (a model trained on a machine of many cores: its digest written anew)
    torch.save({**state, "digest": content_digest(state)}, tmp_path / "m" / "model.pt")
    det = load_model(tmp_path / "m", device="cpu")
    assert det.threads_.threads <= most_threads()
    scored = run("score", src, "--model", tmp_path / "m", "--out", tmp_path / "s")
    assert scored.exit_code == 0, scored.output


def test_an_input_that_is_a_named_pipe_is_refused_not_waited_on(tmp_path):
    sim = simulate_ecg(60, 250, seed=4)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    os.mkfifo(tmp_path / "pipe.csv")
    (tmp_path / "m").mkdir()
    os.mkfifo(tmp_path / "m" / "model.pt")
    cases = [
        (("read", tmp_path / "pipe.csv", "--sampling-rate", 250), "INPUT"),
        (("beats", tmp_path / "pipe.csv", "--sampling-rate", 250, "--out", tmp_path / "o"), "INPUT"),
        (("beats", src, "--reference", tmp_path / "pipe.csv", "--out", tmp_path / "o"), "--reference"),
        (("score", src, "--model", tmp_path / "pipe.csv", "--out", tmp_path / "o"), "--model"),
    ]
    for args, name in cases:  # (each would block for ever on open: a hang ends the test run, not a failure)
        one_line_error(run(*args), f"{name} ", "pipe.csv is not a file nor a folder")
    one_line_error(run("score", src, "--model", tmp_path / "m", "--out", tmp_path / "o"), "model.pt is not a file")
    assert not (tmp_path / "o").exists()


def test_a_rate_given_against_a_time_column_is_refused_as_against_a_stated_one(tmp_path):
    sim = simulate_ecg(120, 250, seed=3)
    times = pd.date_range("2024-01-01", periods=sim.signal.numel(), freq="4ms").strftime("%Y-%m-%d %H:%M:%S.%f")
    pd.DataFrame({"time": times, "ecg": sim.signal.numpy()}).to_csv(tmp_path / "timed.csv", index=False)
    for command, more in (
        ("read", ()),
        ("beats", ("--out", tmp_path / "b")),
        ("beats", ("--out", tmp_path / "c", "--chunk", "1min")),
    ):
        refused = run(command, tmp_path / "timed.csv", "--sampling-rate", 500, *more)
        one_line_error(refused, "timestamps show 250 Hz", "--sampling-rate 500 was given", "--override-rate")
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
    for rate, more in ((250, ()), (500, ("--override-rate",))):  # the timestamps' own rate, or a rate overriding them
        made = run("beats", tmp_path / "timed.csv", "--sampling-rate", rate, *more, "--out", tmp_path / f"r{rate}")
        assert made.exit_code == 0, made.output
        summary = json.loads((tmp_path / f"r{rate}" / "summary.json").read_text())
        assert summary["sampling_rate_hz"] == rate


@pytest.mark.parametrize(
    ("layout", "channel"),
    [("ecg, time", ()), ("ecg, time", ("--channel", "ecg")), ("time, ecg", ("--channel", "ecg"))],
)
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_time_column_gives_the_rate_wherever_it_is_and_whichever_channel_is_named(tmp_path, layout, channel, suffix):
    # the timestamps after the signal, or a channel named on the command line: the ECG commands had
    # passed over them (the rate "unknown", and a rate given against them taken in silence)
    sim = simulate_ecg(60, 250, seed=3)
    frame = pd.DataFrame({"ecg": sim.signal.numpy(), "time": pd.date_range("2024-01-01", periods=15_000, freq="4ms")})
    src = tmp_path / f"timed{suffix}"
    frame = frame[[c.strip() for c in layout.split(",")]]
    frame.to_csv(src, index=False) if suffix == ".csv" else frame.to_parquet(src, index=False)
    made = run("beats", src, *channel, "--out", tmp_path / "b", "--no-figures")
    assert made.exit_code == 0, made.output
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["sampling_rate_hz"] == 250
    for command, more in (("beats", ()), ("ecg", ("--epochs", 1))):
        refused = run(command, src, *channel, "--sampling-rate", 360, *more, "--out", tmp_path / command)
        one_line_error(refused, "timestamps show 250 Hz", "--sampling-rate 360 was given", "--override-rate")
        assert not (tmp_path / command).exists()


def test_an_output_folder_that_is_the_input_folder_or_above_it_is_refused(tmp_path, monkeypatch):
    # it had said "no recordings found": what lies in the output folder is taken for output
    folder = tmp_path / "recs"
    folder.mkdir()
    for i in range(2):
        write_simulated_ecg(simulate_ecg(30, 250, seed=i), folder / f"r{i}.parquet")
    before = sorted(p.name for p in folder.iterdir())
    monkeypatch.chdir(tmp_path)
    for command, out in (("beats", "recs"), ("ecg", "recs"), ("train", "recs"), ("beats", ".")):
        refused = run(command, "recs", "--out", out, *(("--epochs", 1) if command != "beats" else ()))
        one_line_error(refused, f"--out {out} is the folder of the recordings (recs)", "--out recs-runs")
    refused = run("beats", "recs/*.parquet", "--out", "recs")  # a glob searches its fixed part
    one_line_error(refused, "--out recs is the folder of the recordings (recs)")
    assert sorted(p.name for p in folder.iterdir()) == before and sorted(p.name for p in tmp_path.iterdir()) == ["recs"]
    made = run("beats", "recs", "--out", "recs/runs", "--workers", 0, "--no-figures")  # inside it: left out, as before
    assert made.exit_code == 0 and "2 ok, 0 failed" in made.output, made.output


def test_a_model_file_with_a_bit_flipped_is_refused(tmp_path):
    from devicepipe.anomaly import load_model

    sim = simulate_ecg(120, 250, seed=2)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    assert run("ecg", src, "--epochs", 2, "--out", tmp_path / "m").exit_code == 0
    path = tmp_path / "m" / "model.pt"
    state = torch.load(path, weights_only=True)
    data = bytearray(path.read_bytes())
    scores = state["train_scores"].numpy().tobytes()  # the training rows' scores, stored as they are
    at = bytes(data).find(scores)
    assert at > 0
    data[at + 5] ^= 0x10  # one bit of one score
    path.write_bytes(bytes(data))
    flipped = torch.load(path, weights_only=True)  # (the file still loads: nothing else would notice)
    assert not torch.equal(flipped["train_scores"], state["train_scores"])
    with pytest.raises(DevicepipeError, match="has changed since devicepipe wrote it"):
        load_model(path)
    one_line_error(run("score", src, "--model", tmp_path / "m", "--out", tmp_path / "s"), "has changed since")
    assert not (tmp_path / "s").exists()


def test_an_ecg_whose_times_go_back_into_times_they_held_is_refused_and_rows_out_of_order_are_sorted(tmp_path):
    # a clock set back (a minute of local times repeated, as at the end of daylight-saving time):
    # sorted by time, the two stretches' samples interleaved, and a third of the beats were called V
    sim = simulate_ecg(240, 250, seed=2)
    x = sim.signal.numpy()
    times = np.datetime64("2023-10-29T01:58:00") + (np.arange(x.size) * 4_000_000).astype("timedelta64[ns]")
    back = times.copy()
    back[120 * 250 :] -= np.timedelta64(60, "s")

    def write(name: str, t: np.ndarray, rows: np.ndarray) -> Path:
        text = np.datetime_as_string(t[rows], unit="ms")
        pd.DataFrame({"time": text, "ecg": x[rows]}).to_csv(tmp_path / name, index=False)
        return tmp_path / name

    in_order = np.arange(x.size)
    set_back = write("set_back.csv", back, in_order)
    for command in ("beats", "ecg"):
        one_line_error(
            run(command, set_back, "--out", tmp_path / command),
            "go back into times they have held, first at data row 30,001 (from 2023-10-29 01:59:59.996 to "
            "2023-10-29 01:59:00)",
            "write its times in UTC",
        )
        assert not (tmp_path / command).exists()
    # read, which summarises what it sorted, says so too
    said = " ".join(run("read", set_back, "--time-column", "time").stdout.split())
    assert "the times go back into times they have held, first at data row 30,001" in said
    # the same samples in shuffled rows sort into one regular series: read as the ordered file is
    shuffled = write("shuffled.csv", times, np.random.default_rng(0).permutation(x.size))
    ordered = write("ordered.csv", times, in_order)
    for src in (ordered, shuffled):
        assert run("beats", src, "--out", tmp_path / src.stem).exit_code == 0
    found = [pd.read_csv(tmp_path / name / "beats.csv")["peak"].to_numpy() for name in ("ordered", "shuffled")]
    np.testing.assert_array_equal(found[0], found[1])
    assert evaluate_beats(torch.as_tensor(found[0]), sim.r_peaks, 250).f1 > 0.99


def test_an_ecg_whose_times_jump_ahead_is_read_back_to_back_with_a_warning_that_says_so(tmp_path):
    # a wireless recorder drops half a minute of samples: its time column shows the hole, the
    # samples do not; a regular column, or one with a sample's jitter, says nothing
    sim = simulate_ecg(240, 250, seed=2)
    x = sim.signal.numpy()
    times = np.datetime64("2023-01-01T00:00:00") + (np.arange(x.size) * 4_000_000).astype("timedelta64[ns]")
    jitter = np.random.default_rng(1).integers(-800_000, 800_000, x.size).astype("timedelta64[ns]")
    kept = np.ones(x.size, bool)
    kept[120 * 250 : 150 * 250] = False
    cases = {"dropped": (times[kept], x[kept]), "regular": (times, x), "jittered": (times + jitter, x)}
    for name, (t, v) in cases.items():
        pd.DataFrame({"time": np.datetime_as_string(t, unit="us"), "ecg": v}).to_csv(
            tmp_path / f"{name}.csv", index=False
        )
        result = run("beats", tmp_path / f"{name}.csv", "--out", tmp_path / name)
        assert result.exit_code == 0, result.output
        warned = json.loads((tmp_path / name / "summary.json").read_text())["warnings"]
        if name != "dropped":
            assert warned == [], warned
            continue
        said = "jumps ahead 1 time(s), 7,500 sample(s) missing in all (the longest 30 s, after 2023-01-01 00:01:59.996)"
        assert len(warned) == 1 and said in warned[0] and said in " ".join(result.stderr.split())


def test_a_compressed_recording_is_named_so_with_the_fix(tmp_path):
    import gzip

    sim = simulate_ecg(30, 250, seed=1)
    src, _ = write_simulated_ecg(sim, tmp_path / "e.csv")
    packed = tmp_path / "e.csv.gz"
    packed.write_bytes(gzip.compress(src.read_bytes()))
    # (it had been "unknown format '.gz'", as though the recording were of a kind not read)
    one_line_error(run("beats", packed, "--out", tmp_path / "o"), "e.csv.gz is compressed (.gz); decompress it first")
    assert not (tmp_path / "o").exists()


def test_simulate_refuses_a_noise_that_is_no_amount_in_its_own_words(tmp_path):
    # (both had written a file of -inf with exit status 0)
    for command, says in (
        (["simulate", "ecg", "--noise", "inf"], "--noise must be a finite number within 0-1000 mV, got inf"),
        (["simulate", "ecg", "--wander", "inf"], "--wander must be a finite number within 0-1000 mV, got inf"),
        # NaN fails the option's own bound first, which now says the value given
        (["simulate", "ecg", "--wander", "nan"], "'--wander': Input should be greater than or equal to 0, got nan"),
        (["simulate", "ecg", "--noise=-1"], "'--noise': Input should be greater than or equal to 0, got -1"),
        (["simulate", "load", "--noise", "inf"], "--noise must be a finite number within 0-1, got inf"),
    ):
        out = tmp_path / "s.csv"
        one_line_error(run(*command, "--out", out), says)
        assert not out.exists()
