"""Errors the command line reports in one line (no traceback), with their exit codes.

This module sits at the lowest layer (it imports nothing from lazylab), so any layer can raise
the error that the CLI turns into an exit code: an experiment's ``validate(p)`` raises
:class:`InputError` for a bad parameter combination, and ``lazylab reproduce`` exits 2 before
computing anything.

>>> InputError("--set lr: must be < 2 / lambda_max").exit_code
2
>>> UnitFailed("unit failed").exit_code
1
"""

from __future__ import annotations


class LazylabError(Exception):
    """An error the CLI reports in one line (no traceback) with ``exit_code``.

    Parameters
    ----------
    message
        The one line shown to the user.
    detail
        A traceback or other detail, shown only when ``LAZYLAB_DEBUG`` is set.
    """

    exit_code = 1

    def __init__(self, message: str, detail: str | None = None):
        super().__init__(message)
        self.detail = detail


class InputError(LazylabError):
    """Bad input from the user (unknown id or key, value out of range, ...): exit code 2."""

    exit_code = 2


class DataNotFound(InputError):
    """A data set an experiment needs is not where it looked (exit code 2)."""


class StoreFault(InputError):
    """The store or an output file is unreadable, corrupted or read-only (exit code 2).

    The message names the file and what to do about it.
    """


class UnitFailed(LazylabError):
    """A work unit raised (e.g. training diverged); finished units stay stored (exit code 1)."""


class OutOfTime(LazylabError):
    """``--max-time`` ended the run before every unit was computed (exit code 3).

    Every finished unit is stored; the same command with ``--resume`` carries on, so a chain of
    time-limited runs (a scheduler's clock) completes the grid.
    """

    exit_code = 3
