"""Test-wide settings: a non-interactive matplotlib backend."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
