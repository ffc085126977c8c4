"""The package's public names: each resolves to the object its module defines, however imported."""

import re
from importlib import import_module

import torch

import devicepipe


def test_every_export_is_the_object_not_a_submodule():
    modules = set(devicepipe._EXPORTS.values())
    for module in modules:
        import_module(module)  # importing a submodule sets it as an attribute of the package
    for name, module in devicepipe._EXPORTS.items():
        assert getattr(devicepipe, name) is getattr(import_module(module), name), name


def test_durations_read_as_a_person_writes_them():
    from devicepipe.core.units import format_duration, parse_duration

    assert [format_duration(s) for s in (4.2, 1800, 4500, 216000)] == ["4.20 s", "30.0 min", "1.25 h", "2.50 d"]
    # AEP's hourly load, 2004-10-01 to 2018-08-03: 5052.88 d, in years
    assert [format_duration(d * 86400) for d in (364.0, 5052.88)] == ["364.00 d", "13.8 years"]
    assert parse_duration(format_duration(4500).replace(" ", "")) == 4500


def test_api_edges_end_in_a_value_or_a_clear_error():
    import numpy as np
    import pytest
    import torch

    import devicepipe as dp
    from devicepipe.core.errors import DeviceError, DevicepipeError
    from devicepipe.ecg import ecg_peaks, ecg_segment, evaluate_beats

    with pytest.raises(DevicepipeError, match="expected a floating tensor, got torch.int64"):
        dp.MinMaxScaler().fit(torch.arange(10))  # once answered zeros for every value
    with pytest.raises(DevicepipeError, match="empty"):
        dp.StandardScaler().fit(torch.zeros(0))
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="device='cpu'"):
            dp.to_torch(np.zeros(3), device="cuda")
    with pytest.raises(DevicepipeError, match="NaN or infinite positions"):
        evaluate_beats([1.0, float("nan")], [1, 2], 100)
    with pytest.raises(DevicepipeError, match="sampling_rate must be a finite, positive"):
        evaluate_beats([1], [1], 0)
    with pytest.raises(DevicepipeError, match="not negative"):
        evaluate_beats([1], [1], 100, tolerance_s=-1)
    sim = dp.simulate_ecg(30, 250, seed=0)
    plain = ecg_peaks(sim.signal, 250)
    # a tensor that requires grad, and integer samples, give the peaks of the same signal
    assert torch.equal(ecg_peaks(sim.signal.clone().requires_grad_(True), 250), plain)
    scaled = (sim.signal * 1000 + 2000).round()
    assert torch.equal(ecg_peaks(scaled.to(torch.int32), 250), ecg_peaks(scaled, 250))
    # peaks as a plain list cut the same rows as a tensor
    as_list = ecg_segment(sim.signal, plain.tolist(), 250)
    assert torch.equal(as_list.matrix, ecg_segment(sim.signal, plain, 250).matrix)


def test_no_module_imports_another_module_s_private_name():
    # a seam is a public name: what two modules share is public in the lower one (DESIGN.md);
    # 187 such imports were counted before the rule held
    import ast
    from pathlib import Path

    root = Path(devicepipe.__file__).parent
    private = [
        f"{path.relative_to(root)}: {node.module}.{alias.name}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("devicepipe")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert private == [], private


def test_every_function_given_a_rate_refuses_one_that_is_not_a_rate_alike(tmp_path):
    import numpy as np
    import pytest

    import devicepipe as dp
    from devicepipe.core.errors import DevicepipeError

    sim = dp.simulate_ecg(30, 250, seed=0)
    peaks = dp.ecg_peaks(sim.signal, 250)
    calls = {
        "ecg_peaks()": lambda fs: dp.ecg_peaks(sim.signal, fs),
        "ecg_segment()": lambda fs: dp.ecg_segment(sim.signal, peaks, fs),
        "ecg_classes()": lambda fs: dp.ecg_classes(sim.signal, peaks, fs),
        "hrv()": lambda fs: dp.hrv(peaks, fs),
        "nn_intervals()": lambda fs: dp.nn_intervals(peaks, fs),
        "evaluate_beats()": lambda fs: dp.evaluate_beats(peaks, peaks, fs),
        "ecg_peaks_chunked()": lambda fs: dp.ecg_peaks_chunked(lambda a, b: sim.signal[a:b], 7500, fs, chunk=2500),
        # a file stating a rate that is none: refused before anything is written (None: a file stating no rate)
        "write_parquet()": lambda fs: dp.write_parquet({"ecg": sim.signal}, tmp_path / f"{fs!r}.pq", sampling_rate=fs),
    }
    # (ecg_classes had raised ZeroDivisionError, RuntimeError or ValueError; hrv a TypeError for text)
    for where, call in calls.items():
        said = rf"^{re.escape(where)}: sampling_rate must be a finite, positive"
        for bad in (0, -250, float("nan"), float("inf"), "250", True, *([None] if where != "write_parquet()" else [])):
            with pytest.raises(DevicepipeError, match=said):
                call(bad)
        call(np.float32(250))  # a NumPy number is a rate
    assert [p.name for p in tmp_path.iterdir()] == ["np.float32(250.0).pq"]
    # a beat's class reads the intervals either side: repeated or unordered peaks are refused, as hrv() does
    for bad in (peaks.flip(0), torch.cat([peaks[:3], peaks[2:]])):
        with pytest.raises(DevicepipeError, match="strictly increasing"):
            dp.ecg_classes(sim.signal, bad, 250)
    with pytest.raises(DevicepipeError, match="width must be a positive number"):
        dp.resample_rows(torch.ones(3, 10), 0)  # had been torch's "Input and output sizes should be greater than 0"
    assert dp.resample_rows(torch.ones(3, 10), np.int64(4)).shape == (3, 4)


def test_an_undefined_share_is_said_not_printed_as_nan():
    from devicepipe.ecg import BeatScore

    # a reference with no beat in the scoring window (its annotations all rhythm or noise marks)
    none_referenced = "sensitivity - (no reference beat), positive predictivity 0.0000, F1 0.0000"
    assert str(BeatScore(0, 69, 0)).endswith(none_referenced)
    assert str(BeatScore(0, 0, 5)).endswith("sensitivity 0.0000, positive predictivity - (no beat found), F1 0.0000")
    assert "nan" not in str(BeatScore(0, 0, 0)) and str(BeatScore(3, 1, 0)).endswith("0.7500, F1 0.8571")


def test_every_stage_given_r_peaks_refuses_peaks_that_are_not_alike():
    import numpy as np
    import pytest
    import torch

    import devicepipe as dp
    from devicepipe.core.errors import DevicepipeError

    sim = dp.simulate_ecg(60, 250, seed=1)
    x, peaks = sim.signal, dp.ecg_peaks(sim.signal, 250)
    calls = {
        "ecg_classes()": lambda p: dp.ecg_classes(x, p, 250),
        "hrv()": lambda p: dp.hrv(p, 250),
        "nn_intervals()": lambda p: dp.nn_intervals(p, 250),
    }
    bad = {  # (each had been an AttributeError, or a class or an interval read from outside the signal)
        "must be a torch.Tensor of sample positions": [peaks.numpy(), peaks.tolist()],
        "must be strictly increasing": [peaks.flip(0), torch.cat([peaks[:5], peaks[4:]])],
    }
    for where, call in calls.items():
        for said, values in bad.items():
            for value in values:
                with pytest.raises(DevicepipeError, match=rf"^{re.escape(where)}: peaks {said}"):
                    call(value)
        call(peaks)
    # the classes read each beat's signal: peaks outside it are refused (they had been classed)
    for outside in (torch.cat([peaks, torch.tensor([x.numel() + 100])]), torch.cat([torch.tensor([-5]), peaks])):
        with pytest.raises(DevicepipeError, match=r"peaks must lie inside the signal's 15,000 samples"):
            dp.ecg_classes(x, outside, 250)
    # a (time, leads) array, as tables and NumPy lay recordings out, is named so
    with pytest.raises(DevicepipeError, match=r"its shape is \(15000, 1\): time goes last here, so pass it transposed"):
        dp.ecg_peaks(x.reshape(-1, 1), 250)
    assert np.array_equal(dp.ecg_peaks(x.reshape(-1, 1).T, 250)[0].numpy(), peaks.numpy())


def test_chunked_detection_and_segmenting_refuse_what_is_not_alike():
    import pytest

    import devicepipe as dp
    from devicepipe.core.errors import DevicepipeError

    sim = dp.simulate_ecg(60, 250, seed=1)
    x, peaks = sim.signal, dp.ecg_peaks(sim.signal, 250)

    def chunked(read, n, chunk):
        return dp.ecg_peaks_chunked(read, n, 250, chunk=chunk)

    refused = {
        # a length under one sample: a negative one had read x[0:-5], nearly all of it, in silence
        r"n_samples must be a whole number of samples, at least 1, got -5": lambda: chunked(
            lambda a, b: x[a:b], -5, 2500
        ),
        r"chunk must be a whole number of samples, at least 1, got 0": lambda: chunked(lambda a, b: x[a:b], 15000, 0),
        # a reader returning NumPy (it had been an AttributeError on its dtype)
        r"read\(\) must return a torch.Tensor, got ndarray": lambda: chunked(lambda a, b: x.numpy()[a:b], 15000, 2500),
        # peaks out of order, whose peak-to-peak rows would run backwards (they had been cut)
        r"ecg_segment\(\): peaks must be strictly increasing": lambda: dp.ecg_segment(x, peaks.flip(0), 250),
    }
    for said, call in refused.items():
        with pytest.raises(DevicepipeError, match=said):
            call()
    assert chunked(lambda a, b: x[a:b], 15000, 2500).tolist() == peaks.tolist()


def test_read_series_names_itself_when_given_what_it_cannot_read():
    import pytest

    import devicepipe as dp
    from devicepipe.core.errors import DevicepipeError

    # (each had been named "to_torch()", a function the caller never called; bytes as an array of numbers)
    for thing, said in (
        ({"ecg": [1.0, 2.0]}, r"^read_series\(\): cannot convert builtins.dict; pass a NumPy"),
        ((v for v in range(3)), r"^read_series\(\): cannot convert builtins.generator"),
        (b"/tmp/recording.csv", r"^read_series\(\): cannot read bytes; pass a path \(str or pathlib.Path\)"),
    ):
        with pytest.raises(DevicepipeError, match=said):
            dp.read_series(thing)


def test_the_neighbour_kernels_spectrum_and_training_refuse_settings_that_are_none():
    import numpy as np
    import pytest
    import torch

    import devicepipe as dp
    from devicepipe.core.errors import DevicepipeError

    rows, reference = torch.randn(50, 32), torch.randn(80, 32)
    refused = {
        # k of 0 had given an empty tensor of scores; a NaN ridge NaN scores
        r"^knn_distance\(\): k must be a whole number of neighbours, at least 1, got 0": lambda: dp.knn_distance(
            rows, reference, 0
        ),
        r"^local_residual\(\): k must be": lambda: dp.local_residual(rows, reference, 0),
        r"^local_residual\(\): ridge must be a finite number >= 0, got nan": lambda: dp.local_residual(
            rows, reference, 3, ridge=float("nan")
        ),
        # a floor of 0 and one row had been torch's RuntimeError and an IndexError
        r"^row_pyramid\(\): floor must be": lambda: dp.row_pyramid(rows, floor=0),
        r"^row_pyramid\(\): rows must have shape \(n, w\), got \(32,\)": lambda: dp.row_pyramid(rows[0]),
        # a grid of 0 Hz had been a ZeroDivisionError
        r"^hrv_frequency\(\): rate_hz must be a finite, positive number of Hz, got 0": lambda: dp.hrv_frequency(
            np.full(400, 800.0), np.arange(400) * 0.8, rate_hz=0
        ),
        # torch's own "Invalid weight_decay value: -1.0"
        r"weight decay -1.0 must be within \[0, 1\)": lambda: dp.BeatAnomalyDetector(
            model="mlp", epochs=1, weight_decay=-1.0
        ).fit(rows),
    }
    for said, call in refused.items():
        with pytest.raises(DevicepipeError, match=said):
            call()
    assert dp.knn_distance(rows, reference, np.int64(3)).shape == (50,)  # a NumPy count is a count
    assert [level.shape[1] for level in dp.row_pyramid(rows, floor=8)] == [32, 16, 8]


def test_the_holter_summary_writers_and_resampling_refuse_what_makes_no_answer(tmp_path):
    import numpy as np
    import pytest
    import torch

    import devicepipe as dp
    from devicepipe.core.errors import DevicepipeError

    t, labels, irregular = np.arange(100) * 0.8, np.full(100, "N"), np.zeros(100, bool)
    refused = {
        # each had been counted in silence: a summary of half the beats' labels, of a class that is
        # none, of a length of 0 or NaN, of times out of order
        r"every array needs one value a beat, shape \(100,\); got \{'labels': \(50,\)\}": lambda: dp.holter_summary(
            t, labels[:50], irregular, 80.0
        ),
        r"labels must be AAMI classes \['N', 'S', 'V', 'F', 'Q'\], got \['X'\]": lambda: dp.holter_summary(
            t, np.full(100, "X"), irregular, 80.0
        ),
        r"duration_s must be a finite, positive number, got 0.0": lambda: dp.holter_summary(t, labels, irregular, 0.0),
        r"duration_s must be a finite, positive number, got nan": lambda: dp.holter_summary(
            t, labels, irregular, float("nan")
        ),
        r"t must be the beats' times in s, shape \(n,\), rising strictly": lambda: dp.holter_summary(
            t[::-1].copy(), labels, irregular, 80.0
        ),
        # (these had been ArrowInvalid, and an IndexError)
        r"^write_parquet\(\): every column needs one length, got \{'a': 3, 'b': 4\}": lambda: dp.write_parquet(
            {"a": torch.ones(3), "b": torch.ones(4)}, tmp_path / "r.parquet"
        ),
        r"^write_csv\(\): column 'a' has shape \(3, 2\); columns are \(rows,\)": lambda: dp.write_csv(
            {"a": torch.ones(3, 2)}, tmp_path / "r.csv"
        ),
        r"^write_parquet\(\): no columns to write": lambda: dp.write_parquet({}, tmp_path / "e.parquet"),
        r"^resample_rows\(\): matrix must have shape \(n, w\), got \(10,\)": lambda: dp.resample_rows(
            torch.ones(10), 8
        ),
    }
    for said, call in refused.items():
        with pytest.raises(DevicepipeError, match=said):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing half-written
    held = dp.holter_summary(t, labels, irregular, 80.0)
    assert held.to_dict()["counts"]["N"] == 100
    dp.write_parquet({"a": torch.ones(3), "m": torch.ones(3, 2)}, tmp_path / "ok.parquet")  # a matrix column is fine
