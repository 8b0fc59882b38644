"""An exclusive lock per output folder and experiment.

Two runs writing the same experiment into one ``--out`` would delete or recompute each other's
units. :class:`RunLock` takes ``fcntl.flock`` on ``DIR/.ID.lock`` for the whole run and writes
its pid there; a second writer fails at once with :class:`InputError` naming the running pid.
The kernel releases the lock when the process dies (even by ``kill -9``), so a stale lock file
never blocks a later run.

The lock file is opened without truncating it and without following a symbolic link, and it is
refused when it is not a regular file or has more than one hard link: the pid written into it
(and the truncation when the run ends) must never reach another file through a link planted at
``DIR/.ID.lock``. An id that is not a lower-case slug is refused before any path is made.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from lazylab.errors import InputError


def lock_path(out_dir: Path, exp_id: str) -> Path:
    """The lock file of experiment ``exp_id`` in ``out_dir``; InputError for an id that is not
    a lower-case slug (``..`` or ``a/b`` would put it elsewhere)."""
    from lazylab.ids import id_problem

    problem = id_problem(exp_id)
    if problem is not None:
        raise InputError(f"refusing to write into {out_dir}: {problem}")
    return out_dir / f".{exp_id}.lock"


def _open_lock(path: Path) -> int:
    """Open (or create) the lock file without truncating it and without following a symbolic
    link: a link there would make the lock overwrite whatever file it points to. InputError for
    a symbolic link, a non-file, or a file with more than one hard link."""
    import stat

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        if path.is_symlink():
            raise InputError(f"{path} is a symbolic link; lazylab's lock file must be a plain "
                             "file: remove the link and run again") from None
        raise InputError(f"cannot open the lock file {path} ({e.strerror or e})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputError(f"{path} is not a regular file; lazylab's lock file must be a plain "
                         "file: remove it and run again")
    if st.st_nlink > 1:  # a hard link: writing the pid would overwrite another file
        os.close(fd)
        raise InputError(f"{path} has {st.st_nlink} hard links; lazylab's lock file must be a "
                         "file of its own: remove it (the other names keep their data) and run "
                         "again")
    return fd


def is_held(out_dir: Path, exp_id: str) -> bool:
    """Whether another process holds the lock of ``(out_dir, exp_id)`` now.

    Read-only: the file is opened for reading (never created, truncated or written) and a
    shared lock is tried and released, so a reader such as the report cannot alter a file
    linked there. No lock file, or one that cannot be opened, is not held."""
    import fcntl

    try:
        fd = os.open(lock_path(out_dir, exp_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (OSError, InputError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases the shared lock, if taken
    return False


class RunLock:
    """Context manager holding the exclusive lock of ``(out_dir, exp_id)``."""

    def __init__(self, out_dir: Path, exp_id: str):
        self.path = lock_path(out_dir, exp_id)
        self.exp_id = exp_id
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        import fcntl

        fd = _open_lock(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise InputError(
                f"{self.exp_id}: another lazylab process (pid {pid}) is writing into "
                f"{self.path.parent}; wait for it to finish or use another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    @classmethod
    def probe(cls, out_dir: Path, exp_id: str) -> None:
        """InputError if another process holds the lock now (taken and released at once)."""
        if not lock_path(out_dir, exp_id).exists():
            return
        with cls(out_dir, exp_id):
            pass

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            import fcntl

            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
