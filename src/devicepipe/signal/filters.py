"""Linear convolution of long signals, with the kernel chosen per device.

* ``direct`` on the CPU is a block-Toeplitz matrix product: the signal viewed as rows of
  ``B`` samples, each output row the sum of two ``(B, B)`` products (this row's and the
  previous row's contributions). It runs at matmul speed, exact to float32 rounding, where
  ``F.conv1d`` on a ``(1, 1, N)`` tensor is slow and memory-hungry on the CPU. A ``"same"``
  convolution of many rows runs them end to end as one signal (two large products, not two
  per row) and then takes off what each row's ends got from its neighbours.
* ``direct`` on CUDA is ``F.conv1d`` (cuDNN).
* ``fft`` is overlap-add: fixed-size blocks through ``rfft``/``irfft``, processed in groups so
  memory stays bounded however long the input; a linear, not circular, convolution.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

__all__ = ["centred_convolve", "centred_convolve_at", "choose_conv_method", "convolve"]

Mode = Literal["full", "same", "valid"]
Method = Literal["auto", "direct", "fft"]

# kernel lengths up to which the direct method wins (rough crossover; FFT cost grows with log N only)
_DIRECT_MAX_TAPS = {"cpu": 256, "cuda": 512}
_FFT_GROUP_SAMPLES = 1 << 23  # samples per overlap-add group: bounds the FFT's working memory


def choose_conv_method(n_signal: int, n_kernel: int, device: torch.device | str) -> Literal["direct", "fft"]:
    """``"direct"`` or ``"fft"`` for a convolution of these lengths on this device."""
    limit = _DIRECT_MAX_TAPS.get(torch.device(device).type, 256)
    return "direct" if n_kernel <= limit or n_signal <= 4 * n_kernel else "fft"


def convolve(
    x: torch.Tensor,
    kernel: torch.Tensor,
    *,
    mode: Mode = "same",
    method: Method = "auto",
) -> torch.Tensor:
    """Convolve each row of ``x`` with ``kernel`` (true convolution: the kernel is flipped).

    Parameters
    ----------
    x : Tensor of shape ``(..., time)``.
    kernel : Tensor of shape ``(taps,)``; moved to ``x``'s device and dtype.
    mode : ``"full"`` (``time + taps - 1`` samples), ``"same"`` (``time`` samples, centred as
        ``scipy.signal.convolve``) or ``"valid"`` (``time - taps + 1`` samples).
    method : ``"direct"``, ``"fft"`` or ``"auto"`` (see :func:`choose_conv_method`).

    Returns
    -------
    Tensor of shape ``(..., n_out)``, on ``x``'s device, in ``x``'s dtype.
    """
    if kernel.ndim != 1 or kernel.numel() == 0:
        raise ValueError(f"convolve(): kernel must be a non-empty 1-D tensor, got shape {tuple(kernel.shape)}.")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"convolve(): mode must be 'full', 'same' or 'valid', got {mode!r}.")
    if not x.dtype.is_floating_point:
        x = x.to(torch.float32)
    kernel = kernel.to(device=x.device, dtype=x.dtype)
    n, k = x.shape[-1], kernel.numel()
    if mode == "valid" and n < k:
        raise ValueError(f"convolve(): mode='valid' needs at least {k} samples, got {n}.")
    if method == "auto":
        method = choose_conv_method(n, k, x.device)
    lead = x.shape[:-1]
    rows = x.reshape(-1, n)
    if method == "direct" and mode == "same" and x.device.type == "cpu" and n >= k - 1:
        return _toeplitz_same(rows, kernel).reshape(*lead, n)
    if method == "direct":
        full = _conv1d_full(rows, kernel) if x.device.type != "cpu" else _toeplitz_full(rows, kernel)
    elif method == "fft":
        full = _overlap_add_full(rows, kernel)
    else:
        raise ValueError(f"convolve(): method must be 'auto', 'direct' or 'fft', got {method!r}.")
    if mode == "full":
        out = full
    elif mode == "same":
        start = (k - 1) // 2
        out = full[:, start : start + n]
    else:
        out = full[:, k - 1 : n]
    return out.reshape(*lead, out.shape[-1])


def centred_convolve(
    x: torch.Tensor, mean: torch.Tensor, kernel: torch.Tensor, *, end_mean: torch.Tensor | None = None
) -> torch.Tensor:
    """``convolve(x - mean, kernel, mode="same")`` for a zero-sum ``kernel``, without the subtraction.

    ``x`` has shape ``(batch, time)``, ``mean`` ``(batch, 1)``: the level the signal is taken to
    continue at past its ends (``end_mean``, when given, past its end, ``mean`` before its
    start). Where the kernel lies wholly on the signal the level cancels; only the
    ``taps - 1`` samples at either end, where part of the kernel hangs past the signal, are
    corrected. Saves a full-length copy of ``x``.
    """
    n, k = x.shape[-1], kernel.numel()
    end_mean = mean if end_mean is None else end_mean
    filtered = convolve(x, kernel, mode="same")
    if n <= 2 * k:  # short: the ends meet; add each sample's taps past the start and past the end
        idx = torch.arange(n, device=x.device)[:, None] + (k - 1) // 2 - torch.arange(k, device=x.device)
        taps_before = torch.where(idx < 0, kernel, kernel.new_zeros(())).sum(-1)
        taps_after = torch.where(idx >= n, kernel, kernel.new_zeros(())).sum(-1)
        filtered += mean * taps_before + end_mean * taps_after
    else:
        # the sum of the taps that lie on the signal, at each of the k output samples at either end:
        # output i takes taps j with 0 <= i + (k - 1) // 2 - j < n
        # (head[i] = ends[min(i + lead, k - 1)]; tail[i] = ends[-1] - ends[i - (k - lead)], 0 before)
        ends = torch.cumsum(kernel, 0)
        lead = (k - 1) // 2
        head = torch.cat([ends[lead:], ends[-1:].expand(lead)])
        tail = ends[-1] - torch.cat([kernel.new_zeros(k - lead), ends[:lead]])
        filtered[:, :k] -= mean * head
        filtered[:, n - k :] -= end_mean * tail
    return filtered


def centred_convolve_at(
    x: torch.Tensor,
    mean: torch.Tensor,
    kernel: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    *,
    per_candidate: bool = False,
) -> torch.Tensor:
    """``convolve(x - mean, kernel, mode="same")[rows, cols]``, computed at just those samples.

    ``x`` ``(batch, time)``, ``mean`` ``(batch, 1)`` (or ``(n, 1)``, one per sample asked for,
    with ``per_candidate``), ``rows`` and ``cols`` int64 ``(n,)``; returns ``(n,)``.
    """
    n, k = x.shape[-1], kernel.numel()
    idx = cols[:, None] + (k - 1) // 2 - torch.arange(k, device=x.device)  # out[i] = sum_j x[i + start - j] h[j]
    inside = (idx >= 0) & (idx < n)
    level = mean if per_candidate else mean[rows]
    taps = torch.where(inside, x[rows[:, None], idx.clamp(0, n - 1)] - level, x.new_zeros(()))
    return taps @ kernel


def _conv1d_full(rows: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    k = kernel.numel()
    weight = kernel.flip(0).view(1, 1, k)  # conv1d is a correlation: flip for a convolution
    return F.conv1d(rows.unsqueeze(1), weight, padding=k - 1).squeeze(1)


#: Samples per block of :func:`_toeplitz_full` (its GEMMs' inner size): a kernel longer than a
#: block takes a product more per block instead of a larger block, as 32-sample products run at
#: the same FLOP rate as 64-sample ones and a 61-tap kernel then costs 96 multiply-adds an output
#: where a 64-sample block took 128.
TOEPLITZ_BLOCK = 32


def _toeplitz_full(rows: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Full convolution as block-Toeplitz matrix products, blocks of ``B`` (:data:`TOEPLITZ_BLOCK`) samples.

    Output block ``j`` is ``x_j @ T_0 + x_{j-1} @ T_1 + ... + x_{j-P+1} @ T_{P-1}``, ``P - 1`` the
    blocks the kernel's ``k - 1`` past samples reach back over (``P = 2`` for ``k <= B + 1``).
    Each product is one 2-D GEMM over every block of every row (all but the first accumulate
    into the output inside the GEMM, ``beta = 1``), so the whole convolution is ``P`` passes at
    matmul speed. One row is read in place as ``(m, B)`` blocks (no copy), its last ``n mod B``
    samples through one zero-padded block; several rows are laid out once in a buffer with a
    zero block before each row and at least ``k - 1`` zeros after it (so no row reaches into the
    one before): a batch of short rows is then ``P`` large GEMMs, not ``P`` per row.
    """
    batch, n = rows.shape
    k = kernel.numel()
    block = TOEPLITZ_BLOCK
    products = 1 + -(-(k - 1) // block)
    # output i of a block gets input l of the block s before it times kernel[i - l + s * block]
    # (0 off the kernel): with v[block + t] = kernel[t] and zeros around it, that is
    # v[(s + 1) * block + i - l], read as a Hankel view of v with its rows reversed
    v = kernel.new_zeros((products + 1) * block)
    v[block : block + k] = kernel
    taps = v.as_strided((products, block, block), (block, 1, 1), v.storage_offset() + 1).flip(1)
    if batch > 1:
        per_row = -(-(n + k - 1) // block) + 1  # the zero block, then blocks holding every output
        padded = rows.new_empty(batch, per_row * block)
        padded[:, :block].zero_()
        padded[:, block : block + n] = rows
        padded[:, block + n :].zero_()
        blocks = padded.view(-1, block)
        out = torch.mm(blocks, taps[0])
        # a row's first outputs reach back over its zero block into the zeros that end the row before
        for s in range(1, products):
            out[s:].addmm_(blocks[:-s], taps[s])
        return out.view(batch, -1)[:, block : block + n + k - 1]
    m, rest = divmod(n, block)
    out = rows.new_empty(m + products, block)  # n + k - 1 <= (m + products) * block outputs
    out[m:].zero_()
    if m:
        whole = rows.contiguous()[0, : m * block].view(m, block)
        torch.mm(whole, taps[0], out=out[:m])
        for s in range(1, products):
            out[s : m + s].addmm_(whole, taps[s])
    if rest:
        last = rows.new_zeros(1, block)
        last[0, :rest] = rows[0, m * block :]
        for s in range(products):
            out[m + s : m + s + 1].addmm_(last, taps[s])
    return out.view(1, -1)[:, : n + k - 1]


def _toeplitz_same(rows: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """``"same"`` convolution of every row (``(batch, n)``, ``n >= taps - 1``) as one long signal.

    The rows, end to end, are one signal for :func:`_toeplitz_full` (no padded copy, and a
    batch of short rows is two large GEMMs); its ``"same"`` output is then a contiguous
    ``(batch, n)`` view, right but where the kernel reached into the neighbouring row: the first
    ``taps - 1 - (taps - 1) // 2`` outputs of each row (the row before) and its last
    ``(taps - 1) // 2`` (the row after). Those neighbours' contributions are taken off, each a
    small ``(batch, taps)`` product.
    """
    batch, n = rows.shape
    k = kernel.numel()
    lead = (k - 1) // 2
    rows = rows.contiguous()
    out = _toeplitz_full(rows.view(1, -1), kernel)[0, lead : lead + batch * n].view(batch, n)
    if batch == 1:
        return out
    first = k - 1 - lead  # outputs reached by the row before
    if first:
        a = torch.arange(k - 1, device=rows.device)[:, None]  # its last k - 1 samples
        i = torch.arange(first, device=rows.device)[None, :]
        j = i + lead + (k - 1) - a  # the tap joining them
        taps = torch.where((j > i + lead) & (j < k), kernel[j.clamp(0, k - 1)], kernel.new_zeros(()))
        out[1:, :first] -= rows[:-1, n - (k - 1) :] @ taps
    if lead:
        a = torch.arange(lead, device=rows.device)[:, None]  # the row after's first lead samples
        i = torch.arange(lead, device=rows.device)[None, :]  # the last lead outputs
        j = i - a
        taps = torch.where(j >= 0, kernel[j.clamp(0, k - 1)], kernel.new_zeros(()))
        out[:-1, n - lead :] -= rows[1:, :lead] @ taps
    return out


def _overlap_add_full(rows: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Full linear convolution by overlap-add, in groups of blocks to bound memory."""
    batch, n = rows.shape
    k = kernel.numel()
    nfft = 1 << max(16, (8 * k - 1).bit_length())  # blocks well longer than the kernel
    step = nfft - k + 1  # input samples per block
    n_blocks = -(-n // step)
    spectrum = torch.fft.rfft(kernel, n=nfft)
    out = rows.new_zeros(batch, (n_blocks + 1) * step)
    group = max(1, _FFT_GROUP_SAMPLES // nfft)
    for first in range(0, n_blocks, group):
        last = min(n_blocks, first + group)
        seg = rows[:, first * step : last * step]
        if seg.shape[1] < (last - first) * step:
            seg = F.pad(seg, (0, (last - first) * step - seg.shape[1]))
        y = torch.fft.irfft(torch.fft.rfft(seg.reshape(batch, last - first, step), n=nfft) * spectrum, n=nfft)
        out[:, first * step : last * step] += y[..., :step].reshape(batch, -1)
        if k > 1:  # each block's tail overlaps the start of the next block
            tails = out[:, (first + 1) * step : (last + 1) * step].view(batch, last - first, step)
            tails[..., : k - 1] += y[..., step : step + k - 1]
    return out[:, : n + k - 1]
