"""Choose the compute device once and pass it down; size the blocks of blocked evaluations.

Every computation that would form a large intermediate (an empirical-NTK chunk of hidden
units, a row block of a kernel matrix, a block of the kernel solver) asks
:func:`block_elems` how many elements one block may hold, instead of a hard-coded chunk size.
The budget is per device kind and fixed (it never depends on the memory free at the moment), so
block shapes, and with them the rounding of blocked products, are the same run after run:

* CPU: 256 MiB per block (2^25 float64 values);
* CUDA: 1/16 of the device's total memory (5 GiB on an 80 GB H100);
* a run-wide override from :func:`set_memory_budget` (the runner's memory policy), or a
  ``budget_bytes`` passed to one call.

:func:`row_blocks` turns that into row slices for an (n, n') result, and
:func:`blocked_rows` evaluates ``fn(X[rows], Z)`` block by block into one output (H-infinity,
closed-form kernels, kernel-matrix products).

Example
-------
>>> import torch
>>> block_elems(torch.device("cpu"))
33554432
>>> [(s.start, s.stop) for s in row_blocks(5, 4, torch.device("cpu"), budget_bytes=64)]
[(0, 2), (2, 4), (4, 5)]
"""

from __future__ import annotations

from collections.abc import Callable

import torch

#: Default bytes per block on CPU: 256 MiB.
CPU_BLOCK_BYTES = 1 << 28
_CUDA_FRACTION = 16
_override: int | None = None


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' was requested but no CUDA GPU is available; "
                             "use --device cpu or auto")
        return torch.device("cuda")
    raise ValueError(f"device must be one of auto, cpu, cuda; got {name!r}")


def available_devices() -> list[str]:
    """The devices this process can compute on: ``"cpu"``, then ``"cuda:0"``, ``"cuda:1"``,
    ... for each visible CUDA GPU, then ``"mps"`` where Apple's backend is available."""
    out = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())
                     if torch.cuda.is_available()]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out


def check_device(device: torch.device | str, name: str = "device") -> torch.device:
    """``device`` as a ``torch.device`` that exists here, else one ValueError naming the
    parameter ``name`` and the devices that are available.

    Accepts ``"auto"`` (as :func:`resolve_device`), ``"cpu"``, ``"cuda"``, ``"cuda:i"``,
    ``"mps"`` or a ``torch.device``. torch itself answers ``torch.device("cuda")`` on a machine
    without CUDA only when the first tensor is placed, with a bare ``AssertionError``.

    >>> check_device("cpu")
    device(type='cpu')
    """
    if isinstance(device, str) and device == "auto":
        return resolve_device("auto")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is not None and dev.type == "cpu":
        return dev
    have = available_devices()
    ok = dev is not None and (
        (dev.type == "cuda" and torch.cuda.is_available()
         and (dev.index or 0) < torch.cuda.device_count())
        or (dev.type == "mps" and "mps" in have))
    if not ok:
        why = ("; torch sees no CUDA GPU here" if dev is not None and dev.type == "cuda"
               and not torch.cuda.is_available() else "")
        raise ValueError(f"{name} must be 'auto' or an available device ({', '.join(have)}); "
                         f"got {device!r}{why}")
    assert dev is not None
    return dev


def set_memory_budget(budget_bytes: int | None) -> None:
    """Set (or with None clear) the bytes per block for every device, for this process."""
    global _override
    if budget_bytes is not None and (int(budget_bytes) != budget_bytes or budget_bytes < 1):
        raise ValueError(f"budget_bytes must be a positive integer or None; got "
                         f"{budget_bytes!r}")
    _override = None if budget_bytes is None else int(budget_bytes)


def memory_budget(device: torch.device | str) -> int:
    """Bytes one block may use on ``device``: the override, else the per-kind default."""
    if _override is not None:
        return _override
    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        return gpu_block_bytes(torch.cuda.get_device_properties(dev).total_memory)
    return CPU_BLOCK_BYTES


def gpu_block_bytes(total_memory: int) -> int:
    """Bytes per block on a GPU of ``total_memory`` bytes: a sixteenth of it, at least
    :data:`CPU_BLOCK_BYTES` (an 80 GiB card: 5 GiB).

    >>> gpu_block_bytes(80 * 2**30) // 2**30
    5
    """
    return max(CPU_BLOCK_BYTES, int(total_memory) // _CUDA_FRACTION)


def block_elems(device: torch.device | str, budget_bytes: int | None = None, *,
                itemsize: int = 8) -> int:
    """Elements of ``itemsize`` bytes one block may hold: budget_bytes // itemsize (>= 1).

    ``budget_bytes`` None uses :func:`memory_budget`; itemsize 8 (float64) by default, so a
    float32 computation sized with the default is conservative by 2x.
    """
    budget = memory_budget(device) if budget_bytes is None else budget_bytes
    if int(budget) != budget or budget < 1:
        raise ValueError(f"budget_bytes must be a positive integer; got {budget_bytes!r}")
    if int(itemsize) != itemsize or itemsize < 1:
        raise ValueError(f"itemsize must be a positive integer; got {itemsize!r}")
    return max(1, int(budget) // int(itemsize))


def row_blocks(n_rows: int, row_elems: int, device: torch.device | str,
               budget_bytes: int | None = None, *, itemsize: int = 8) -> list[slice]:
    """Consecutive row slices covering range(n_rows), each with at most
    ``block_elems // row_elems`` rows (at least one)."""
    rows = max(1, block_elems(device, budget_bytes, itemsize=itemsize) // max(1, int(row_elems)))
    return [slice(i, min(int(n_rows), i + rows)) for i in range(0, int(n_rows), rows)]


def blocked_rows(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], X: torch.Tensor,
                 Z: torch.Tensor, *, out_device: torch.device | str | None = None,
                 out_dtype: torch.dtype | None = None, budget_bytes: int | None = None,
                 scratch_per_entry: int = 4) -> torch.Tensor:
    """The (n, n') matrix fn(X, Z) computed as fn(X[rows], Z) one row block at a time.

    Parameters
    ----------
    fn : (X_block (b, ...), Z (n', ...)) -> (b, n') block (e.g. a closed-form kernel).
    X, Z : the row and column inputs.
    out_device, out_dtype : where the result lives and its dtype (default: the first block's);
        e.g. a GPU computes blocks of a matrix kept in host memory.
    budget_bytes : bytes of scratch per block (default :func:`memory_budget` of X's device).
    scratch_per_entry : float64-sized temporaries ``fn`` creates per output entry; blocks hold
        budget / (8 * scratch_per_entry) entries.

    A single call ``fn(X, Z)`` when the whole matrix fits in one block.
    """
    n, n2 = X.shape[0], Z.shape[0]
    blocks = row_blocks(n, n2 * max(1, int(scratch_per_entry)), X.device, budget_bytes)
    if len(blocks) == 1:
        whole = fn(X, Z)
        return whole.to(device=out_device or whole.device, dtype=out_dtype or whole.dtype)
    out: torch.Tensor | None = None
    for sl in blocks:
        B = fn(X[sl], Z)
        if out is None:
            out = torch.empty(n, n2, dtype=out_dtype or B.dtype,
                              device=out_device if out_device is not None else B.device)
        out[sl] = B
    assert out is not None
    return out
