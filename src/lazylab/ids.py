"""The experiment ids and paper keys of PRODUCT.md, known without importing torch.

The command line checks the ids it is given against this manifest first, so a mistyped id is
refused in well under a second (importing the registry imports torch). A test keeps it equal to
the registry (:func:`lazylab.experiments.all_experiments`).
"""

from __future__ import annotations

import difflib

__all__ = ["EXPERIMENT_PAPERS", "PAPER_KEYS", "unknown_targets", "suggest"]

#: Paper keys, in PRODUCT.md's order.
PAPER_KEYS: tuple[str, ...] = ("arora", "ghorbani", "bailee", "nichani", "allenzhu")

#: Every registered experiment id and its paper key.
EXPERIMENT_PAPERS: dict[str, str] = {
    "ghorbani-qf-width": "ghorbani", "ghorbani-qf-samples": "ghorbani",
    "ghorbani-mg-width": "ghorbani", "ghorbani-mg-samples": "ghorbani",
    "arora-convergence": "arora", "arora-spectrum": "arora", "arora-complexity": "arora",
    "arora-learnability": "arora",
    "bailee-coupling": "bailee", "bailee-xor": "bailee", "bailee-expressivity": "bailee",
    "bailee-higher-order": "bailee", "bailee-landscape": "bailee",
    "bailee-generalization": "bailee",
    "nichani-regularizer": "nichani", "nichani-mlp-scaling": "nichani",
    "nichani-spectrum": "nichani", "nichani-taylor": "nichani",
    "allenzhu-performance": "allenzhu", "allenzhu-alpha": "allenzhu",
    "allenzhu-norm": "allenzhu", "allenzhu-kernel-bound": "allenzhu",
}


def unknown_targets(targets: list[str] | tuple[str, ...]) -> list[str]:
    """The targets that are neither an experiment id, a paper key nor ``all``.

    >>> unknown_targets(["bailee-xor", "arora", "all", "nosuch"])
    ['nosuch']
    """
    known = {*EXPERIMENT_PAPERS, *PAPER_KEYS, "all"}
    return [t for t in targets if t not in known]


def suggest(name: str) -> list[str]:
    """Up to three known ids or paper keys close to ``name``.

    >>> suggest("bailee-xr")[0]
    'bailee-xor'
    """
    return difflib.get_close_matches(name, [*EXPERIMENT_PAPERS, *PAPER_KEYS, "all"], n=3)
