"""Paired benchmarks: the CPU baselines compute the notebook's answers, the timing interleaves."""

import numpy as np
import pytest
import torch

from devicepipe.bench import paired as pb
from devicepipe.bench.baselines import seed_fftconv, seed_zero_padding


def test_the_competent_cpu_baselines_give_the_notebooks_answers():
    pytest.importorskip("numba")
    pytest.importorskip("scipy")
    from devicepipe.bench.baselines import seed_nms_numba

    rng = np.random.default_rng(0)
    signal = np.cumsum(rng.normal(size=20_000)).astype(np.float32)
    signal[5000:5400] = 1.0  # a plateau: ties inside windows
    assert np.allclose(pb.circular_convolve(signal, pb.seed_taps()), seed_fftconv(signal), atol=1e-3)
    curvature = seed_fftconv(signal).astype(np.float32)
    curvature[9000:9300] = curvature[9000]  # ties again, after the filter
    notebook = seed_nms_numba(curvature, 180)
    assert notebook.sum() > 10
    assert np.array_equal(pb.nms_max_filter(curvature, 180), notebook)
    assert np.array_equal(pb.ours_gates(torch.from_numpy(curvature), 180).numpy(), notebook)
    for window in (31, 50):  # odd and even windows place the centre differently
        assert np.array_equal(pb.nms_max_filter(curvature, window), seed_nms_numba(curvature, window))
    indices = np.flatnonzero(notebook == 1)
    assert np.array_equal(pb.gather_rows(signal, indices), seed_zero_padding(signal, indices))


def test_paired_interleaves_and_takes_ratios_within_each_repeat(monkeypatch):
    clock = {"now": 0.0}
    calls = []
    monkeypatch.setattr(pb.time, "perf_counter", lambda: clock["now"])

    def work(name: str, seconds: float):
        def fn():
            calls.append(name)
            clock["now"] += seconds
            return name

        return fn

    seen = {}
    contenders = [
        pb.Contender("notebook", "a", work("a", 0.3)),
        pb.Contender("cpu baseline", "b", work("b", 0.2)),
        pb.Contender("ours", "c", work("c", 0.1)),
    ]
    record = pb.paired(contenders, repeats=3, warmup=1, threads=1, check=seen.update)
    assert seen == {"a": "a", "b": "b", "c": "c"}  # the check saw every contender's result
    assert calls[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # the order rotates each repeat
    ratios = {r["versus"]: r for r in record["ratios"]}
    assert ratios["a"]["median"] == pytest.approx(3.0) and ratios["b"]["median"] == pytest.approx(2.0)
    assert ratios["a"]["ci95"] == pytest.approx([3.0, 3.0])
    medians = {c["label"]: c["median_s"] for c in record["contenders"]}
    assert medians == pytest.approx({"a": 0.3, "b": 0.2, "c": 0.1})


def test_a_wrong_answer_stops_the_comparison():
    def wrong(results):
        raise AssertionError("differs")

    with pytest.raises(AssertionError, match="differs"):
        pb.paired([pb.Contender("notebook", "a", lambda: 1), pb.Contender("ours", "b", lambda: 2)], check=wrong)


def test_thread_limit_sets_and_restores_every_pool():
    import pyarrow

    before = (torch.get_num_threads(), pyarrow.cpu_count())
    with pb.thread_limit(1):
        assert torch.get_num_threads() == 1 and pyarrow.cpu_count() == 1
    assert (torch.get_num_threads(), pyarrow.cpu_count()) == before


def test_bootstrap_interval_brackets_the_median():
    rng = np.random.default_rng(1)
    values = list(rng.lognormal(0.5, 0.3, 25))
    low, high = pb._bootstrap_ci(values)
    assert low <= float(np.median(values)) <= high and low < high


@pytest.mark.skipif(not pb.peak_rss_supported(), reason="the resident high-water mark cannot be reset here")
def test_peak_memory_sees_a_temporary_allocation():
    def allocate():
        block = np.ones(64 * 2**20 // 8)  # 64 MB, touched, then freed
        return float(block[-1])

    record = pb.paired([pb.Contender("ours", "alloc", allocate)], repeats=1)
    assert record["contenders"][0]["peak_rss_rise_bytes"] >= 48 * 2**20
