"""Whether a Dask scheduler answers at an address, within a time limit, before a client is made.

``distributed.Client`` waits without end on a server that accepts the connection and never
answers (an HTTP server), and reads a server that sends other bytes as a message of exabytes
(a ``MemoryError``); a refused connection it retries until its timeout. :func:`check_scheduler`
says which of these it is, in one line, within ``seconds``.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from devicepipe.core.errors import DevicepipeError

#: How long a scheduler has to accept the connection and answer (seconds).
SCHEDULER_TIMEOUT_S = 10.0


def check_scheduler(address: str, seconds: float | None = None) -> None:
    """Refuse ``address`` with one line unless a Dask scheduler answers there within ``seconds``
    (:data:`SCHEDULER_TIMEOUT_S` when None):
    nothing listening, no answer, or an answer that is not a Dask scheduler's. For ``tcp://``
    addresses the scheduler is asked who it is; for ``tls://`` only the connection is tried (the
    handshake needs the client's security settings)."""
    from distributed.comm import parse_address, parse_host_port  # noqa: PLC0415 - Dask is optional

    seconds = SCHEDULER_TIMEOUT_S if seconds is None else seconds

    try:
        scheme, location = parse_address(address, strict=False)
        host, port = parse_host_port(location) if scheme in ("tcp", "tls") else (None, None)
    except ValueError as exc:  # not an address ('host' with no port, an unknown scheme)
        _refuse(address, str(exc))
    if host is None:
        return
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except ConnectionRefusedError:
        _refuse(address, "nothing listens there")
    except TimeoutError:
        _refuse(address, f"no answer within {seconds:g} s")
    except OSError as exc:
        _refuse(address, exc.strerror or str(exc))
    if scheme == "tcp":
        _ask_identity(address, seconds)


def _ask_identity(address: str, seconds: float) -> None:
    """Ask the server at ``address`` who it is, as a Dask client would; refuse anything but a scheduler."""
    from distributed.comm import connect  # noqa: PLC0415 - Dask is optional

    async def identity() -> Any:
        comm = await connect(address, timeout=seconds)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    try:
        reply = asyncio.run(asyncio.wait_for(identity(), seconds))
    except TimeoutError:
        _refuse(address, f"a server is there, but no Dask answer came within {seconds:g} s")
    except (Exception, MemoryError):  # noqa: BLE001 - bytes that are not Dask's protocol, read as any error
        reply = None
    if not (isinstance(reply, dict) and reply.get("type") == "Scheduler"):
        _refuse(address, "what answers there is not a Dask scheduler")


def _refuse(address: str, why: str) -> None:
    raise DevicepipeError(
        f"cannot reach the Dask scheduler at {address} ({why}); check the address and that it runs."
    ) from None
