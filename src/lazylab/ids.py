"""The built-in experiment ids and paper keys, known without importing torch.

The ids come from the generated manifest (:mod:`lazylab.runner.manifest`, written from the
registry by ``make manifest``). The command line checks the ids it is given against them first,
so a mistyped id is refused in well under a second (importing the registry imports torch).
Installed plugins (entry-point group ``lazylab.experiments``) are known by their entry-point
names: an experiment id, or a paper key for an entry that registers several experiments.

An experiment id names a folder and a lock file inside ``--out``, so it must be a lower-case
slug (:data:`ID_PATTERN`): ``..`` or ``a/b`` would put files outside the experiment's folder.
:func:`id_problem` says what is wrong with one; the registry refuses such ids, built-in and
plugin alike, and the run lock refuses them again before touching the disk.
"""

from __future__ import annotations

import difflib
import re

from lazylab.papers import PAPERS

#: An experiment id, paper key or plugin entry-point name: lower-case letters and digits in
#: words joined by single hyphens (``bailee-xor``), at most :data:`ID_MAX` characters.
ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
ID_MAX = 64

#: Paper keys of the built-in experiments, in the order of the papers' table
#: (:data:`lazylab.papers.PAPERS`).
PAPER_KEYS: tuple[str, ...] = tuple(PAPERS)


def _papers() -> dict[str, str]:
    """The ``papers`` table of the generated manifest, read directly (no lazylab import)."""
    import json
    from pathlib import Path

    path = Path(__file__).with_name("runner") / "param_manifest.json"
    try:
        papers = json.loads(path.read_text()).get("papers", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in papers.items()}


#: Every built-in experiment id and its paper key, from the generated manifest
#: (``make manifest``; a test keeps it equal to the registry).
EXPERIMENT_PAPERS: dict[str, str] = _papers()


def id_problem(name: object, what: str = "experiment id") -> str | None:
    """None if ``name`` is a valid id (:data:`ID_PATTERN`), else one line saying why not.

    >>> id_problem("bailee-xor") is None
    True
    >>> print(id_problem("../x")[:50])
    experiment id '../x' is not a lower-case slug (let
    """
    if not isinstance(name, str):
        return f"{what} must be a string; got {type(name).__name__}"
    if len(name) > ID_MAX:
        return f"{what} {name[:ID_MAX]!r}... is longer than {ID_MAX} characters"
    if ID_PATTERN.fullmatch(name) is None:
        return (f"{what} {name!r} is not a lower-case slug (letters a-z, digits 0-9 and single "
                "hyphens, e.g. my-experiment)")
    return None


def plugin_names() -> list[str]:
    """Names of the installed entry points of group ``lazylab.experiments`` that other
    packages declare: by convention an experiment id (an entry naming an Experiment class) or
    a paper key (an entry naming a module that registers several). Read from package metadata,
    without importing anything."""
    from importlib.metadata import entry_points

    return [ep.name for ep in entry_points(group="lazylab.experiments")
            if not ep.value.startswith("lazylab.experiments.")]


def unknown_targets(targets: list[str] | tuple[str, ...]) -> list[str]:
    """The targets that are neither an experiment id, a paper key nor ``all``.

    >>> unknown_targets(["bailee-xor", "arora", "all", "nosuch"])
    ['nosuch']
    """
    known = {*EXPERIMENT_PAPERS, *PAPER_KEYS, "all"}
    unknown = [t for t in targets if t not in known]
    return [t for t in unknown if t not in set(plugin_names())] if unknown else []


def suggest(name: str) -> list[str]:
    """Up to three known ids or paper keys close to ``name``.

    >>> suggest("bailee-xr")[0]
    'bailee-xor'
    """
    return difflib.get_close_matches(
        name, [*EXPERIMENT_PAPERS, *PAPER_KEYS, *plugin_names(), "all"], n=3)
