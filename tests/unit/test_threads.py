"""The thread policy: one thread for a tiny model, the cores for a large one, explicit choices win."""

import dataclasses
import os
import subprocess
import sys
import time

import pytest
import torch

from conftest import leaves_imported
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.threads import ONE_THREAD_BELOW_FLOPS, THREADS_ENV, choose_threads, step_flops, using_threads
from devicepipe.models import LightVAE, LightVAEConfig, MLPAutoencoder, MLPAutoencoderConfig


def test_step_flops_of_the_load_mlp_by_hand():
    # Linear(24,32) Linear(32,8) Linear(8,32) Linear(32,24) on 64 rows: the forward pass is 2*64*(24*32 + 32*8
    # + 8*32 + 32*24); backward computes every weight gradient (as much again) and the input gradient of every
    # layer but the first (whose input, the data, needs none)
    model = MLPAutoencoder(MLPAutoencoderConfig(24, 32, 8))
    forward = 2 * 64 * (24 * 32 + 32 * 8 + 8 * 32 + 32 * 24)
    input_grads = 2 * 64 * (32 * 8 + 8 * 32 + 32 * 24)
    assert step_flops(model, torch.rand(64, 24)) == forward + forward + input_grads == 688_128
    assert all(p.grad is None for p in model.parameters())  # the count leaves no gradients behind


@pytest.mark.parametrize(
    ("model", "batch"),
    [
        (LightVAE(LightVAEConfig(256, 2)), (256, 256)),  # the ecg pipeline's VAE and batch
        (LightVAE(LightVAEConfig(64, 4)), (7, 64)),
        (MLPAutoencoder(MLPAutoencoderConfig(1024, 1024, 64)), (256, 1024)),
    ],
)
def test_step_flops_equal_torch_flop_counter(model, batch):
    # the reference: PyTorch's own counter, at the dispatcher, on the same step
    from torch.utils.flop_counter import FlopCounterMode

    rows = torch.rand(*batch)
    noise = None if model.noise_dim is None else torch.zeros(batch[0], model.noise_dim)
    with FlopCounterMode(display=False) as counter:
        model.losses(rows, noise).mean().backward()
    model.zero_grad(set_to_none=True)
    assert step_flops(model, rows) == counter.get_total_flops() > 0


def test_counting_a_step_does_not_import_torch_dynamo():
    # FlopCounterMode's first use imports torch._dynamo (2-3 s); the policy's count must not
    code = (
        "import torch\n"
        "from devicepipe.core.threads import step_flops\n"
        "from devicepipe.models import LightVAE, LightVAEConfig\n"
        "step_flops(LightVAE(LightVAEConfig(256, 2)), torch.rand(16, 256))\n"
    )
    assert not leaves_imported(code, "torch._dynamo")


def test_policy_picks_one_thread_for_a_tiny_model_and_the_cores_for_a_large_one(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    tiny = choose_threads(MLPAutoencoder(MLPAutoencoderConfig(24, 32, 8)), torch.rand(64, 24), cores=4)
    assert (tiny.threads, tiny.reason) == (1, "policy") and tiny.step_flops < ONE_THREAD_BELOW_FLOPS
    large = choose_threads(MLPAutoencoder(MLPAutoencoderConfig(1024, 1024, 64)), torch.rand(256, 1024), cores=4)
    assert (large.threads, large.reason) == (4, "policy") and large.step_flops > ONE_THREAD_BELOW_FLOPS
    # an ensemble trains its members in one step: their work adds up
    vae, beats = LightVAE(LightVAEConfig(256, 2)), torch.rand(256, 256)
    one = choose_threads(vae, beats, cores=2)
    five = choose_threads(vae, beats, cores=2, copies=5)
    assert five.step_flops == pytest.approx(5 * one.step_flops) and five.threads == 2


def test_explicit_choices_win_and_bad_ones_are_clear(monkeypatch):
    model, batch = MLPAutoencoder(MLPAutoencoderConfig(24, 32, 8)), torch.rand(64, 24)
    monkeypatch.setenv(THREADS_ENV, "3")
    got = choose_threads(model, batch).to_dict()
    assert {k: got[k] for k in ("threads", "reason", "step_flops")} == {
        "threads": 3,
        "reason": THREADS_ENV,
        "step_flops": None,
    }
    assert choose_threads(model, batch, threads=2).threads == 2  # the argument before the environment
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(DevicepipeError, match=f"{THREADS_ENV}='{bad}' is not a thread count"):
            choose_threads(model, batch)
    with pytest.raises(DevicepipeError, match="at least 1"):
        choose_threads(model, batch, threads=0)


def test_using_threads_restores_the_count():
    before = torch.get_num_threads()
    with using_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), using_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_the_wait_policy_is_recorded_as_the_environment_set_it(monkeypatch):
    from devicepipe.core.threads import ThreadChoice

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert ThreadChoice(1, "policy").to_dict()["wait_policy"] == "default"
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    assert ThreadChoice(1, "policy").to_dict()["wait_policy"] == "PASSIVE"


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_command_makes_idle_threads_sleep_unless_told_otherwise(given, expected):
    code = (
        "import os\nfrom devicepipe.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(os.environ.get('OMP_WAIT_POLICY'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | (
        {} if given is None else {"OMP_WAIT_POLICY": given}
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip().splitlines()[-1] == expected


def test_detection_runs_short_inputs_on_one_thread_and_long_ones_on_the_threads_torch_has(monkeypatch):
    from devicepipe.core import threads as threads_module
    from devicepipe.core.threads import DETECTION_THREADS_FROM, detection_threads
    from devicepipe.ecg import peaks as peak_module
    from devicepipe.simulate import simulate_ecg

    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(threads_module, "runnable_elsewhere", lambda: 0)  # an idle 2-core machine
    monkeypatch.setattr(threads_module.os, "cpu_count", lambda: 2)
    seen: list[int] = []
    ricker = peak_module.ECG_PEAK_METHODS["ricker"]

    def spy(x, fs, **options):
        seen.append(torch.get_num_threads())
        return ricker.find(x, fs, **options)

    monkeypatch.setitem(peak_module.ECG_PEAK_METHODS, "ricker", dataclasses.replace(ricker, find=spy))
    short = simulate_ecg(40.0, 250.0, seed=0).signal  # 10,000 samples
    long = short.repeat(DETECTION_THREADS_FROM // short.numel() + 1)  # just past the crossover
    with using_threads(2):
        one, two = peak_module.ecg_peaks(short, 250.0), peak_module.ecg_peaks(long, 250.0)
        assert torch.get_num_threads() == 2  # restored after each call
        monkeypatch.setenv(THREADS_ENV, "2")  # an explicit choice wins
        assert torch.equal(peak_module.ecg_peaks(short, 250.0), one)
    assert seen == [1, 2, 2] and one.numel() > 40 and two.numel() > 7000
    # never more threads than torch has; a GPU's host threads are left alone
    monkeypatch.delenv(THREADS_ENV)
    with using_threads(1):
        assert detection_threads(DETECTION_THREADS_FROM) == 1
    with using_threads(2):
        assert detection_threads(DETECTION_THREADS_FROM - 1) == 1
        assert detection_threads(DETECTION_THREADS_FROM) == 2
        assert detection_threads(10, "cuda") == 2


def test_runnable_elsewhere_reads_the_kernels_count_less_the_reader(tmp_path):
    from devicepipe.core.threads import runnable_elsewhere

    f = tmp_path / "loadavg"
    f.write_text("0.52 0.58 0.59 3/245 12345\n")
    assert runnable_elsewhere(loadavg=str(f)) == 2
    f.write_text("0.52 0.58 0.59 1/245 12345\n")
    assert runnable_elsewhere(loadavg=str(f)) == 0
    f.write_text("not a loadavg\n")
    assert runnable_elsewhere(loadavg=str(f)) is None
    assert runnable_elsewhere(loadavg=str(tmp_path / "absent")) is None


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="/proc/loadavg is Linux's")
def test_runnable_elsewhere_sees_two_busy_processes():
    from devicepipe.core.threads import runnable_elsewhere

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(1.0)  # started and spinning
        seen = runnable_elsewhere()
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert seen is not None and seen >= 2


@pytest.mark.parametrize(
    ("cores", "others", "torch_threads", "expected"),
    [
        (2, 0, 2, 2),  # idle: every thread torch has
        (2, 1, 2, 1),  # one core busy elsewhere: one thread
        (2, 2, 2, 1),  # two busy processes: one thread, never none
        (2, None, 2, 2),  # no count to read: torch's
        (8, 3, 4, 4),  # enough free cores
        (8, 6, 4, 2),  # two free
    ],
)
def test_long_detection_leaves_the_cores_other_work_runs_on(monkeypatch, cores, others, torch_threads, expected):
    from devicepipe.core import threads as threads_module
    from devicepipe.core.threads import DETECTION_THREADS_FROM, detection_threads

    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(threads_module, "runnable_elsewhere", lambda: others)
    monkeypatch.setattr(threads_module.os, "cpu_count", lambda: cores)
    with using_threads(torch_threads):
        assert detection_threads(DETECTION_THREADS_FROM) == expected
        assert detection_threads(DETECTION_THREADS_FROM - 1) == 1  # short calls: one thread regardless
        monkeypatch.setenv(THREADS_ENV, str(torch_threads))  # an explicit count wins over the load
        assert detection_threads(DETECTION_THREADS_FROM) == torch_threads


def test_chunked_detection_works_its_chunks_on_one_thread_below_the_crossover(monkeypatch):
    from devicepipe.ecg import ecg_peaks, ecg_peaks_chunked
    from devicepipe.simulate import simulate_ecg

    monkeypatch.delenv(THREADS_ENV, raising=False)
    x = simulate_ecg(120.0, 250.0, seed=1).signal
    seen: list[int] = []

    def read(a: int, b: int) -> torch.Tensor:
        seen.append(torch.get_num_threads())
        return x[a:b]

    with using_threads(2):
        got = ecg_peaks_chunked(read, x.numel(), 250.0, chunk=5_000)
        assert torch.get_num_threads() == 2
    assert set(seen) == {1} and len(seen) > 1
    assert torch.equal(got, ecg_peaks(x, 250.0))
