"""The tutorials' micro-benchmarks, done with synchronised, warmed-up, repeated timings.

matmul GFLOP/s; creating a tensor on the device vs on the host and copying; host-device
bandwidth against transfer size (pageable and pinned; on a CPU-only machine, the memory copy
bandwidth, for reference); a training step of the CIFAR-shaped CNN of the CPU-vs-GPU
tutorial; the XOR classifier of the PyTorch tutorial; an ensemble of 10 MLPs forward and
backward as a loop vs ``torch.func.vmap``; ``DataLoader`` vs on-device batching.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from devicepipe.bench.timer import measure
from devicepipe.ecg import ecg_peaks
from devicepipe.learning.train import fit
from devicepipe.models import LightVAE, LightVAEConfig
from devicepipe.simulate import simulate_ecg

__all__ = ["CifarCNN", "SimpleClassifier", "SimpleMLP", "crossover", "run_micro"]

# fp32 peak of a few GPUs (dense, without tensor cores), TFLOP/s, from the vendors' data sheets
_PEAK_TFLOPS = {"H100": 67.0, "H200": 67.0, "A100": 19.5, "V100": 15.7, "T4": 8.1, "L4": 30.3}


class CifarCNN(nn.Module):
    """The CNN of the CPU-vs-GPU tutorial, for 32 x 32 RGB images and 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        pool = nn.MaxPool2d(2, 2)
        self.conv = nn.Sequential(
            nn.Conv2d(3, 6, 5),
            nn.ReLU(),
            pool,
            nn.Conv2d(6, 16, 5, padding=3),
            nn.ReLU(),
            nn.Conv2d(16, 16, 5),
            nn.ReLU(),
            pool,
            nn.Conv2d(16, 16, 3),
            nn.ReLU(),
            pool,
            nn.Flatten(),
        )
        self.fc = nn.Sequential(nn.Linear(64, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


class SimpleClassifier(nn.Module):
    """The XOR classifier of the PyTorch tutorial: 2 -> 4 (tanh) -> 1."""

    def __init__(self, num_inputs: int = 2, num_hidden: int = 4, num_outputs: int = 1) -> None:
        super().__init__()
        self.linear1, self.act, self.linear2 = (
            nn.Linear(num_inputs, num_hidden),
            nn.Tanh(),
            nn.Linear(num_hidden, num_outputs),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.act(self.linear1(x)))


class SimpleMLP(nn.Module):
    """The MLP of the model-ensembling tutorial: 784 -> 128 -> 128 -> 10."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 128), nn.Linear(128, 128), nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(-2)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def _peak_gflops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((1000 * v for k, v in _PEAK_TFLOPS.items() if k in name), None)


def run_micro(
    devices: list[torch.device], *, quick: bool = False, repeats: int = 5, progress: Callable[[str], None] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Run every micro-benchmark on every device; a dict of sections, each a list of records."""
    note = progress or (lambda _m: None)
    out: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("matmul", "create", "bandwidth", "cnn_step", "xor", "ensemble", "batching")
    }
    for dev in devices:
        out["matmul"] += _matmul_records(dev, quick, repeats, note)
        out["create"].append(_create_record(dev, quick, repeats, note))
        out["bandwidth"] += _bandwidth_records(dev, quick, repeats)
        out["cnn_step"].append(_cnn_record(dev, quick, repeats, note))
        out["xor"].append(_xor_record(dev, repeats, note))
        out["ensemble"].append(_ensemble_record(dev, repeats, note))
        out["batching"].append(_batching_record(dev, quick, repeats, note))
    return out


def _matmul_records(dev: torch.device, quick: bool, repeats: int, note: Callable[[str], None]) -> list[dict[str, Any]]:
    """Square float32 matmuls: GFLOP/s and their share of the device's peak."""
    records = []
    for n in [256, 512] if quick else [1024, 2048, 4096]:
        note(f"matmul {n} on {dev}")
        a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        t = measure(
            partial(torch.matmul, a, b),
            device=dev,
            repeats=repeats,
            check=partial(_matmul_corner, a=a, b=b),
        )
        gflops = 2 * n**3 / t.median_s / 1e9
        peak = _peak_gflops(dev)
        records.append(
            {
                "device": str(dev),
                "n": n,
                **t.to_dict(),
                "gflops": gflops,
                "peak_gflops": peak,
                "share_of_peak": None if peak is None else gflops / peak,
            }
        )
    return records


def _create_record(dev: torch.device, quick: bool, repeats: int, note: Callable[[str], None]) -> dict[str, Any]:
    """Random numbers made on the device against made on the host and copied."""
    n = 1_000_000 if quick else 50_000_000
    note(f"tensor creation on {dev}")
    on_dev = measure(partial(torch.randn, n, device=dev), device=dev, repeats=repeats)
    via_host = measure(partial(_randn_then_to, n, dev), device=dev, repeats=repeats)
    return {
        "device": str(dev),
        "elements": n,
        "on_device": on_dev.to_dict(),
        "host_then_copy": via_host.to_dict(),
        "ratio": via_host.median_s / on_dev.median_s,
    }


def _bandwidth_records(dev: torch.device, quick: bool, repeats: int) -> list[dict[str, Any]]:
    """Copies by size: host to a GPU from pageable and pinned memory, or on the CPU memory to memory."""
    records = []
    for size in [2**k for k in range(10, 23 if quick else 29, 2)]:
        host = torch.ones(size // 4, dtype=torch.float32)  # touched: real pages, not the zero page
        if dev.type == "cuda":
            sources = (("pageable", host), ("pinned", host.pin_memory()))
            timed = [
                (kind, measure(partial(src.to, dev, non_blocking=True), device=dev, repeats=repeats))
                for kind, src in sources
            ]
        else:
            # into a buffer that exists already: the copy itself, not the page faults of fresh memory
            target = torch.empty_like(host)
            t = measure(partial(target.copy_, host), device=dev, repeats=repeats)
            timed = [("memory copy", t)]
        for kind, t in timed:
            records.append(
                {"device": str(dev), "kind": kind, "bytes": size, **t.to_dict(), "gb_per_s": size / t.median_s / 1e9}
            )
    return records


def _cnn_record(dev: torch.device, quick: bool, repeats: int, note: Callable[[str], None]) -> dict[str, Any]:
    """One SGD step of the CIFAR tutorial's CNN on a batch of random images."""
    note(f"CNN training step on {dev}")
    torch.manual_seed(0)
    cnn, batch = CifarCNN().to(dev), 64 if quick else 256
    opt = torch.optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9)
    images, labels = torch.randn(batch, 3, 32, 32, device=dev), torch.randint(10, (batch,), device=dev)

    def cnn_step() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(cnn(images), labels)
        loss.backward()
        opt.step()
        return loss.detach()

    t = measure(cnn_step, device=dev, repeats=repeats, check=lambda r: _finite(r))
    return {"device": str(dev), "batch": batch, **t.to_dict(), "images_per_s": batch / t.median_s}


def _xor_record(dev: torch.device, repeats: int, note: Callable[[str], None]) -> dict[str, Any]:
    """100 SGD steps of the tutorial's XOR classifier on 1,000 rows."""
    note(f"XOR classifier on {dev}")
    torch.manual_seed(0)
    xor, steps = SimpleClassifier().to(dev), 100
    x = torch.randint(0, 2, (1000, 2), device=dev).float()
    y = (x[:, 0].long() ^ x[:, 1].long()).float()
    opt = torch.optim.SGD(xor.parameters(), lr=0.1)

    def xor_train() -> torch.Tensor:
        for _ in range(steps):
            opt.zero_grad()
            loss = nn.functional.binary_cross_entropy_with_logits(xor(x).squeeze(1), y)
            loss.backward()
            opt.step()
        return loss.detach()

    t = measure(xor_train, device=dev, repeats=repeats, check=lambda r: _finite(r))
    return {"device": str(dev), "steps": steps, **t.to_dict(), "steps_per_s": steps / t.median_s}


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    if not torch.allclose(a.float().cpu(), b.float().cpu(), rtol=1e-3, atol=1e-3):
        raise AssertionError("matmul result differs from a float64 reference")


def _finite(r: Any) -> None:
    if not torch.isfinite(torch.as_tensor(r)).all():
        raise AssertionError("loss is not finite")


def _ensemble_record(dev: torch.device, repeats: int, note: Callable[[str], None]) -> dict[str, Any]:

    note(f"ensemble loop vs vmap on {dev}")
    torch.manual_seed(0)
    models = [SimpleMLP().to(dev) for _ in range(10)]
    data = torch.randn(64, 28, 28, device=dev)
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def loop() -> torch.Tensor:
        outs = [m(data) for m in models]
        sum(o.square().mean() for o in outs).backward()
        return torch.stack(outs).detach()

    def vmapped() -> torch.Tensor:
        outs = vmap(lambda p, b: functional_call(base, (p, b), (data,)), in_dims=(0, 0))(params, buffers)
        outs.square().mean(dim=(1, 2)).sum().backward()
        return outs.detach()

    reference = torch.stack([m(data) for m in models]).detach()

    def same(r: torch.Tensor) -> None:
        if not torch.allclose(r, reference, rtol=1e-4, atol=1e-5):
            raise AssertionError("ensemble outputs differ")

    t_loop = measure(loop, device=dev, repeats=repeats, check=same)
    t_vmap = measure(vmapped, device=dev, repeats=repeats, check=same)
    return {
        "device": str(dev),
        "members": 10,
        "batch": 64,
        "loop": t_loop.to_dict(),
        "vmap": t_vmap.to_dict(),
        "vmap_speedup": t_loop.median_s / t_vmap.median_s,
    }


def _batching_record(dev: torch.device, quick: bool, repeats: int, note: Callable[[str], None]) -> dict[str, Any]:
    note(f"DataLoader vs on-device batching on {dev}")
    n = 5_000 if quick else 91_000  # the notebook's 91 k beats of 256 samples
    data = torch.randn(n, 256, device=dev)

    def loader_epoch() -> torch.Tensor:
        total = torch.zeros((), device=dev)
        for batch in torch.utils.data.DataLoader(cast(Any, data), batch_size=1024, shuffle=True):  # (rows)
            total += batch[0, 0]
        return total

    def device_epoch() -> torch.Tensor:
        total = torch.zeros((), device=dev)
        order = torch.randperm(n, device=dev)
        for start in range(0, n, 1024):
            total += data[order[start : start + 1024]][0, 0]
        return total

    t_loader = measure(loader_epoch, device=dev, repeats=min(repeats, 3))
    t_device = measure(device_epoch, device=dev, repeats=min(repeats, 3))
    return {
        "device": str(dev),
        "rows": n,
        "batch": 1024,
        "dataloader": t_loader.to_dict(),
        "on_device": t_device.to_dict(),
        "speedup": t_loader.median_s / t_device.median_s,
    }


def crossover(
    devices: list[torch.device], *, quick: bool = False, repeats: int = 3, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Filter + peaks, and one training epoch, against input size on each device, transfers included.

    The GPU's time counts the host-to-device copy of the input and the copy back of the
    result; the crossover is the smallest size from which the GPU is faster at every larger
    size measured. Without a second device there is no crossover to find: only the CPU curve.
    """

    note = progress or (lambda _m: None)
    sizes = [10_000, 100_000, 1_000_000] if quick else [10_000, 100_000, 1_000_000, 4_000_000, 20_000_000]
    rows = [256, 1024] if quick else [256, 1024, 4096, 16384, 65536]
    signal = simulate_ecg(max(sizes) / 250, 250, seed=1).signal
    curves: dict[str, list[dict[str, Any]]] = {"detect": [], "train_epoch": []}
    for dev in devices:
        for n in sizes:
            note(f"crossover: detection of {n:,} samples on {dev}")
            host = signal[:n].clone()
            t = measure(partial(_peaks_on, host, dev), device=dev, repeats=repeats)
            curves["detect"].append({"device": str(dev), "size": n, **t.to_dict()})
        for m in rows:
            note(f"crossover: training epoch of {m:,} beats on {dev}")
            beats_host = torch.randn(m, 256)

            def epoch(beats_host: torch.Tensor = beats_host) -> float:
                torch.manual_seed(0)
                model = LightVAE(LightVAEConfig(width=256, latent=2)).to(dev)
                return fit(model, beats_host.to(dev), epochs=1, batch_size=256, val_fraction=0.0).train[-1]

            t = measure(epoch, device=dev, repeats=repeats)
            curves["train_epoch"].append({"device": str(dev), "size": m, **t.to_dict()})
    result: dict[str, Any] = {"curves": curves, "crossover": {}}
    gpu = [str(d) for d in devices if d.type == "cuda"]
    for key, points in curves.items():
        if not gpu:
            result["crossover"][key] = None
            continue
        cpu = {p["size"]: p["median_s"] for p in points if p["device"] == "cpu"}
        g = {p["size"]: p["median_s"] for p in points if p["device"] == gpu[0]}
        common = sorted(set(cpu) & set(g))
        wins = [s for s in common if g[s] < cpu[s]]
        result["crossover"][key] = next((s for s in common if all(t in wins for t in common if t >= s)), None)
    return result


def _matmul_corner(r: torch.Tensor, *, a: torch.Tensor, b: torch.Tensor) -> None:
    """Raise unless the product's corner ``r[:4, :4]`` is ``a @ b``'s, computed in float64."""
    _close(r[:4, :4], (a[:4].double() @ b[:, :4].double()).float())


def _randn_then_to(n: int, dev: torch.device) -> torch.Tensor:
    return torch.randn(n).to(dev)


def _peaks_on(host: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """One lead's R peaks found on ``dev``, back on the host."""
    return cast(torch.Tensor, ecg_peaks(host.to(dev), 250)).cpu()
