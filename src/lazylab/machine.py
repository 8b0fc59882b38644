"""What the host machine has, read without importing torch (the CLI checks its arguments
before torch loads), and how its C allocator treats large blocks."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

#: Environment switch: ``LAZYLAB_CPU_ALLOCATOR=system`` leaves the C allocator as it is.
ALLOCATOR_ENV = "LAZYLAB_CPU_ALLOCATOR"
#: mallopt(3) parameters of glibc (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Blocks up to this size come from the heap and freed memory up to this size stays there.
_KEEP_BYTES = 2**31 - 1
_applied: bool | None = None


def machine_memory() -> int | None:
    """Physical memory of this machine in bytes (None where unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def keep_freed_memory(libc: Any = None) -> bool:
    """Let glibc serve tensors of up to 2 GiB from its heap and keep freed memory for reuse.

    By default glibc maps every block above 128 KiB (dynamically up to 32 MiB) afresh and unmaps
    it on free, so a loop that allocates a 36 MB tensor a step pays a ``munmap`` on every free
    and a page fault for every fresh page: 4.8 ms to free two such tensors and 45 ms instead of
    25 ms to draw and square them on the project's CPU. The CUDA caching allocator never pays
    that on a GPU, and the numbers do not change (the same operations on the same values).

    Opt-in, for measuring (``bench_paper_scale.py --keep-freed-memory``), never applied to a
    run: the heap does not give memory back, and one ``allenzhu-alpha`` grid at m = 2000
    (150 configurations, two epochs) grew to 22 GB of resident memory under it, against a
    1.5 GB peak with the system's setting. Returns whether the setting is in effect; a C
    library without ``mallopt`` (macOS, musl) or ``LAZYLAB_CPU_ALLOCATOR=system`` leaves the
    allocator alone.
    """
    global _applied
    if libc is not None:
        return _set_thresholds(libc)
    if _applied is None:
        _applied = _set_thresholds(None)
    return _applied


def _set_thresholds(libc: Any) -> bool:
    if os.environ.get(ALLOCATOR_ENV, "").strip().lower() == "system":
        return False
    try:
        if libc is None:
            name = ctypes.util.find_library("c")
            libc = ctypes.CDLL(name) if name else None
    except OSError:
        return False
    fn = getattr(libc, "mallopt", None)
    return fn is not None and all(fn(ctypes.c_int(param), ctypes.c_int(_KEEP_BYTES)) == 1
                                  for param in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD))
