"""What the host machine has, read without importing torch (the CLI checks its arguments
before torch loads)."""

from __future__ import annotations

import os

__all__ = ["machine_memory"]


def machine_memory() -> int | None:
    """Physical memory of this machine in bytes (None where unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None
