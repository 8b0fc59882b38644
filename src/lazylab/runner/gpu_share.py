"""Runs that share one GPU: a ledger of memory reservations, admission by memory.

Several ``lazylab reproduce`` processes started side by side on one card used to fail
together when one of them over-allocated. Each run on a CUDA device now reserves, before it
computes, the GPU memory it expects to use (the cost model's peak per worker times its
workers, at least :data:`MIN_RESERVE` per worker: a CUDA context alone takes about half a
GiB) in a ledger file per card, under an exclusive lock. A reservation that does not fit
beside the live ones (held by processes still running) waits until it does; one that can
never fit (more than the card's usable memory) is refused at once, naming the numbers. The
entry is removed when the run ends, and entries of processes that died are ignored.

The ledger lives in ``$LAZYLAB_GPU_LEDGER`` (default ``~/.cache/lazylab/gpu``), one JSON file
per card, named by the card's identity, so every run of this user on this machine sees it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lazylab.errors import InputError

#: The least a run reserves per worker process (bytes).
MIN_RESERVE = 2**30
#: The share of the card's memory that reservations may fill (allocator fragmentation).
USABLE = 0.9


def ledger_dir() -> Path:
    return Path(os.environ.get("LAZYLAB_GPU_LEDGER")
                or Path.home() / ".cache" / "lazylab" / "gpu")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _locked(path: Path) -> Iterator[dict[str, int]]:
    """The ledger's live entries {pid: bytes}, under an exclusive lock; written back after."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            raw = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            raw = {}  # a damaged ledger is rebuilt from the runs that reserve from now on
        entries = {int(k): int(v) for k, v in raw.items()
                   if str(k).isdigit() and isinstance(v, int) and _alive(int(k))}
        yield entries
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, path)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextmanager
def reserve(card: str, nbytes: int, total: int, *, wait: float = 3600.0, poll: float = 5.0,
            on_wait: Callable[[int, int], None] | None = None) -> Iterator[None]:
    """Hold ``nbytes`` of the card ``card`` (total memory ``total`` bytes) while the block
    runs (module docstring). Waits at most ``wait`` seconds for room (``on_wait(used,
    usable)`` is called once when it starts waiting), then raises InputError."""
    usable = int(total * USABLE)
    if nbytes > usable:
        raise InputError(
            f"this run expects {nbytes / 2**30:.1f} GiB of GPU memory; the card has "
            f"{usable / 2**30:.1f} GiB usable ({total / 2**30:.1f} GiB): reduce the sizes "
            "(--set) or --workers")
    path = ledger_dir() / f"{''.join(c if c.isalnum() else '_' for c in card)}.json"
    pid, deadline, told = os.getpid(), time.monotonic() + wait, False
    while True:
        with _locked(path) as entries:
            used = sum(v for k, v in entries.items() if k != pid)
            if used + nbytes <= usable:
                entries[pid] = int(nbytes)
                break
        if time.monotonic() > deadline:
            raise InputError(
                f"waited {wait:.0f} s for {nbytes / 2**30:.1f} GiB of GPU memory; other runs "
                f"hold {used / 2**30:.1f} of {usable / 2**30:.1f} GiB (ledger {path})")
        if on_wait is not None and not told:
            on_wait(used, usable)
            told = True
        time.sleep(poll)
    try:
        yield
    finally:
        with _locked(path) as entries:
            entries.pop(pid, None)


def for_run(device, peak_bytes: float | None, workers: int,
            on_wait: Callable[[int, int], None] | None = None):
    """The reservation of a run on ``device`` (a no-op context off CUDA): the peak per worker
    (at least :data:`MIN_RESERVE`) times the workers."""
    from contextlib import nullcontext

    import torch

    if device.type != "cuda":
        return nullcontext()
    props = torch.cuda.get_device_properties(device)
    card = str(getattr(props, "uuid", "") or f"{props.name}-{device.index or 0}")
    need = max(MIN_RESERVE, int(peak_bytes or 0)) * max(1, workers)
    return reserve(card, need, int(props.total_memory), on_wait=on_wait)
