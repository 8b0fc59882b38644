"""The in-memory run harness of the test suite: re-exported from :mod:`lazylab.testing`, where
plugins find it too."""

from __future__ import annotations

from lazylab.testing import CPU, Run, perturbations, run_in_memory, tilted

__all__ = ["CPU", "Run", "perturbations", "run_in_memory", "tilted"]
