"""The code a work unit executes, as per-file hashes: part of the identity of stored units.

A unit of a built-in experiment runs code from all over the lazylab package (the paper's
package, the toolkit, models, kernels, solvers, training loops), and a plugin's unit runs
its own package's code too. :func:`code_identity` records, for the lazylab package and (for
a plugin experiment) the top-level package of the experiment's module, the SHA-256 of every
``.py`` file under it, so that ``--resume`` after an edit to *any* of them is refused,
naming the files that changed (:func:`describe_code_change`), instead of mixing units
computed by the old and the new code. The versions of torch and numpy are recorded next to
it by :mod:`lazylab.runner.spec`.

Each tree is hashed once per process (about 1.5 MB of source: milliseconds), so a file
edited while a run is in progress does not change that run's identity.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from pathlib import Path

#: The lazylab package directory whose ``.py`` files are hashed.
LAZYLAB_ROOT = Path(__file__).resolve().parent.parent

#: Root path -> its file hashes, computed once per process.
_CACHE: dict[Path, dict[str, str]] = {}

#: Files shown by name in a refusal before "and N more".
_SHOWN = 3


def source_hashes(root: Path) -> dict[str, str]:
    """Relative POSIX path -> first 16 hex digits of the SHA-256 of each ``.py`` file under
    ``root`` (a directory, searched recursively, ``__pycache__`` and hidden folders skipped),
    or of ``root`` itself when it is a file (a single-module plugin). Cached per process."""
    root = Path(root).resolve()
    if root not in _CACHE:
        if root.is_file():
            files = [root]
            base = root.parent
        else:
            base = root
            files = sorted(f for f in root.rglob("*.py")
                           if not any(part == "__pycache__" or part.startswith(".")
                                      for part in f.relative_to(root).parts[:-1]))
        _CACHE[root] = {f.relative_to(base).as_posix(): hashlib.sha256(f.read_bytes())
                        .hexdigest()[:16] for f in files}
    return _CACHE[root]


def package_root(cls: type) -> tuple[str, Path] | None:
    """``(name, path)`` of the top-level package (or single module) that defines ``cls``:
    the directory of a package, the file of a module; None when it has no source file
    (a class defined interactively)."""
    top = cls.__module__.split(".")[0]
    mod = sys.modules.get(top)
    paths = list(getattr(mod, "__path__", None) or [])
    if paths:
        return top, Path(paths[0])
    try:
        return top, Path(inspect.getfile(mod if mod is not None else cls))
    except (TypeError, OSError):
        return None


def code_identity(cls: type) -> dict[str, dict[str, str]]:
    """Package -> file hashes (:func:`source_hashes`) of the code a unit of ``cls`` runs:
    ``"lazylab"`` always, plus the experiment's own top-level package when it is not
    lazylab (a plugin)."""
    out = {"lazylab": source_hashes(LAZYLAB_ROOT)}
    own = package_root(cls)
    if own is not None and own[0] != "lazylab":
        out[own[0]] = source_hashes(own[1])
    return out


def code_version(identity: dict[str, dict[str, str]]) -> str:
    """16 hex digits summarising a :func:`code_identity` (written to config.json)."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_code_change(old: dict[str, dict[str, str]] | None,
                         new: dict[str, dict[str, str]] | None) -> list[str]:
    """What differs between two :func:`code_identity` records, one entry per package, naming
    the files edited, added or removed (the first three, then a count).

    >>> describe_code_change({"lazylab": {"a.py": "1", "b.py": "2"}},
    ...                      {"lazylab": {"a.py": "1", "b.py": "3", "c.py": "4"}})
    ['lazylab source changed (b.py, c.py)']
    >>> describe_code_change(None, {"lazylab": {}})
    ['lazylab source (not recorded with the stored units: stored by an older lazylab)']
    """
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ["lazylab source (not recorded with the stored units: stored by an older "
                "lazylab)"]
    out = []
    for pkg in sorted(set(old) | set(new)):
        a, b = (v if isinstance(v, dict) else {} for v in (old.get(pkg), new.get(pkg)))
        if a == b:
            continue
        files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
        shown = ", ".join(files[:_SHOWN]) + (f" and {len(files) - _SHOWN} more"
                                             if len(files) > _SHOWN else "")
        label = "lazylab source" if pkg == "lazylab" else f"plugin {pkg} source"
        out.append(f"{label} changed ({shown})")
    return out
