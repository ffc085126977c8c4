"""Where the recordings run: a local Dask cluster, a user's Dask scheduler, or a plain loop
(:class:`Engine`)."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from devicepipe.batch.scheduler import SCHEDULER_TIMEOUT_S, check_scheduler
from devicepipe.core.device import usable_cores
from devicepipe.core.errors import DevicepipeError
from devicepipe.startup.server import WORKER_PRELOAD

#: Local workers per usable core at most (more only compete for the cores and the memory:
#: every worker process holds its own torch).
WORKERS_PER_CORE = 4
#: Dask settings of a local cluster started here, each unless the user's Dask configuration sets
#: it (see :func:`_local_cluster_config`): the workers' statistical profiler (a stack sample every
#: 10 ms) off, and the event loops' latency tick (every 20 ms) and resource monitors (every 500 ms
#: and 100 ms) slowed.
#: A batch of recordings needs none of them that often; each wakes a process's event loop, which
#: then takes the interpreter's lock from the thread running the recordings. On the 2-core
#: machine they made a folder run on two workers 7 % longer (BENCHMARKS.md).
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}


@dataclass(frozen=True)
class Engine:
    """Where the recordings run: ``workers=0`` in this process, else on Dask (a local cluster of
    ``workers`` processes, or the cluster at ``scheduler``); ``devices``: one per worker, in turn."""

    workers: int | None = None  # None: one per usable core (local cluster)
    scheduler: str | None = None
    devices: tuple[str, ...] = ("auto",)

    def describe(self, n_workers: int, threads: int | None, dashboard: str | None) -> dict[str, Any]:
        kind = "loop" if self.workers == 0 else ("dask (scheduler)" if self.scheduler else "dask (local cluster)")
        return {
            "kind": kind,
            "workers": n_workers,
            "threads_per_worker": threads,
            "scheduler": self.scheduler,
            "dashboard": dashboard,
            "devices": list(self.devices),
        }


@contextlib.contextmanager
def dask_client(engine: Engine, n_workers: int, threads: int | None) -> Iterator[Any]:
    """A Dask client: of the cluster at ``engine.scheduler``, or of a local cluster started here."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise DevicepipeError(
            "Dask distributed is not installed",
            fix="pip install 'dask[distributed]', or run without it: {workers=0}.",
            param="workers",
        ) from None
    if engine.scheduler:
        check_scheduler(engine.scheduler)
        try:
            client = Client(engine.scheduler, timeout=f"{SCHEDULER_TIMEOUT_S:g}s")
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address ('host' with no port)
            raise DevicepipeError(
                f"cannot reach the Dask scheduler at {engine.scheduler} ({exc}); check the address and that it runs."
            ) from None
        with client:
            yield client
        return
    # any free port: the scheduler's HTTP server (its dashboard with bokeh, its health routes without)
    # starts either way, and on Dask's default 8787 it warns when another cluster holds that port
    dashboard = ":0"
    env = {"OMP_NUM_THREADS": str(threads or 1), "MKL_NUM_THREADS": str(threads or 1)}
    with dask.config.set({"distributed.worker.multiprocessing-method": _start_method(), **_local_cluster_config()}):
        try:
            cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=dashboard,
                silence_logs=logging.CRITICAL,  # a failed recording is its row; Dask's own logs are not the user's
                env=env,
            )
        except Exception as exc:  # noqa: BLE001 - Dask's reason (a bad setting in the Dask configuration, ...), as one line
            detail = " ".join(str(exc).split()) or type(exc).__name__
            detail = detail if len(detail) <= 160 else f"{detail[:157]}..."
            raise DevicepipeError(
                f"the local Dask cluster did not start ({detail})",
                fix="check the Dask configuration (DASK_* variables, ~/.config/dask), or run without Dask: "
                "{workers=0}.",
                param="workers",
            ) from None
        with cluster, Client(cluster) as client:
            yield client


def dashboard_of(client: Any) -> str | None:
    """The address of the cluster's dashboard, or None where bokeh (which draws it) is not installed."""
    return (client.dashboard_link or None) if importlib.util.find_spec("bokeh") is not None else None


def _local_cluster_config() -> dict[str, Any]:
    """:data:`LOCAL_CLUSTER_CONFIG`, less what the user's Dask configuration sets: in a Dask
    configuration file or a ``DASK_*`` environment variable, or in this process to a value other
    than the one Dask ships. The cluster's nannies hand it on to their workers."""
    import dask

    shipped = dask.config.merge(*dask.config.defaults)
    users = dask.config.collect()  # the files and the environment alone
    unset = object()
    return {
        k: v
        for k, v in LOCAL_CLUSTER_CONFIG.items()
        if dask.config.get(k, unset, config=users) is unset and dask.config.get(k) == dask.config.get(k, config=shipped)
    }


def _start_method() -> str:
    """How the local cluster starts its workers: from a fork server that has imported torch and
    the pipelines once (each spawned worker would import them again: seconds per worker, which
    a folder of short recordings notices), where the platform has one."""
    import multiprocessing

    import dask
    from distributed.utils import get_mp_context

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        context = get_mp_context()  # Dask's own preload list first, then ours in its place
    context.set_forkserver_preload(list(WORKER_PRELOAD))  # no change where the command started it early
    return "forkserver"


def worker_count(engine: Engine) -> int:
    if engine.workers is None:
        return max(1, len(engine.devices) if engine.devices != ("auto",) else usable_cores())
    if engine.workers < 0:
        raise DevicepipeError(
            f"{{param}} must be 0 or more, got {engine.workers}.", param="workers", value=engine.workers
        )
    cores = usable_cores()
    most = max(WORKERS_PER_CORE * cores, len(engine.devices))
    if engine.scheduler is None and engine.workers > most:
        raise DevicepipeError(
            f"{{param}} {engine.workers} is more local workers than this machine's {cores} core(s) can run "
            "(each is a process with its own torch)",
            fix=f"give at most {most}, or {{scheduler=ADDRESS}} for a larger Dask cluster.",
            param="workers",
            value=engine.workers,
        )
    return engine.workers
