"""The reproduced papers, the built-in experiment ids and the paper keys, known without
importing torch.

:data:`PAPERS` is the one table of the five papers lazylab reproduces: each row holds a paper's
key (the short name used in experiment ids, the command line, the documentation's page
``papers/KEY.md`` and the package ``lazylab.experiments.KEY``), its authors, year, title, venue
and arXiv identifier. Derived from it: :data:`PAPER_KEYS`, the one-line citations
(``lazylab.experiments.PAPERS``), the BibTeX entries (:func:`lazylab.bibtex.bibtex`), the
documentation's paper pages and their navigation (``mkdocs_hooks.py``) and each paper
package's ``common.PAPER`` (:func:`paper_of`). CITATION.cff lists the same references (a test
compares them).

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
from dataclasses import dataclass, field

#: An experiment id, paper key or plugin entry-point name: lower-case letters and digits in
#: words joined by single hyphens (``bailee-xor``), at most :data:`ID_MAX` characters.
ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
ID_MAX = 64


@dataclass(frozen=True)
class Paper:
    """One reproduced paper.

    Parameters
    ----------
    key : str
        Short name: experiment ids start with it, ``lazylab reproduce KEY`` runs the paper.
    authors : tuple of str
        ``"Family, Given"`` for each author, in the paper's order.
    year : int
        Year of the venue's proceedings.
    title : str
        Title as on arXiv.
    venue : str
        The proceedings (BibTeX ``booktitle``).
    arxiv : str
        arXiv identifier (``https://arxiv.org/abs/ARXIV``).
    cite_key : str
        BibTeX citation key.
    extra : tuple of (str, str)
        Further BibTeX fields in order, e.g. ``(("volume", "97"),)``.
    """

    key: str
    authors: tuple[str, ...]
    year: int
    title: str
    venue: str
    arxiv: str
    cite_key: str
    extra: tuple[tuple[str, str], ...] = field(default=())

    @property
    def families(self) -> list[str]:
        """The authors' family names."""
        return [a.split(",")[0].strip() for a in self.authors]

    @property
    def short(self) -> str:
        """``"Arora et al. 2019"``, ``"Bai & Lee 2020"``: the navigation's label."""
        names = self.families
        who = " & ".join(names) if len(names) <= 2 else f"{names[0]} et al."
        return f"{who} {self.year}"

    @property
    def citation(self) -> str:
        """One line: every family name, the year and the title."""
        return f"{', '.join(self.families)} {self.year}, {self.title}"

    @property
    def page(self) -> str:
        """The documentation page generated for the paper."""
        return f"papers/{self.key}.md"

    @property
    def url(self) -> str:
        """The paper's arXiv page."""
        return f"https://arxiv.org/abs/{self.arxiv}"


#: The reproduced papers by key, in the order of the papers' table (README, CLI, docs).
PAPERS: dict[str, Paper] = {p.key: p for p in (
    Paper("arora",
          ("Arora, Sanjeev", "Du, Simon S.", "Hu, Wei", "Li, Zhiyuan", "Wang, Ruosong"), 2019,
          "Fine-Grained Analysis of Optimization and Generalization for Overparameterized "
          "Two-Layer Neural Networks",
          "Proceedings of the 36th International Conference on Machine Learning (ICML)",
          "1901.08584", "arora2019finegrained",
          (("series", "Proceedings of Machine Learning Research"), ("volume", "97"),
           ("pages", "322--332"))),
    Paper("ghorbani",
          ("Ghorbani, Behrooz", "Mei, Song", "Misiakiewicz, Theodor", "Montanari, Andrea"), 2019,
          "Limitations of Lazy Training of Two-layers Neural Networks",
          "Advances in Neural Information Processing Systems 32 (NeurIPS)",
          "1906.08899", "ghorbani2019limitations"),
    Paper("bailee", ("Bai, Yu", "Lee, Jason D."), 2020,
          "Beyond Linearization: On Quadratic and Higher-Order Approximation of Wide Neural "
          "Networks",
          "International Conference on Learning Representations (ICLR)",
          "1910.01619", "bai2020beyond"),
    Paper("nichani", ("Nichani, Eshaan", "Bai, Yu", "Lee, Jason D."), 2022,
          "Identifying good directions to escape the NTK regime and efficiently learn "
          "low-degree plus sparse polynomials",
          "Advances in Neural Information Processing Systems 35 (NeurIPS)",
          "2206.03688", "nichani2022identifying"),
    Paper("allenzhu", ("Allen-Zhu, Zeyuan", "Li, Yuanzhi"), 2019,
          "What Can ResNet Learn Efficiently, Going Beyond Kernels?",
          "Advances in Neural Information Processing Systems 32 (NeurIPS)",
          "1905.10337", "allenzhu2019resnet"),
)}


#: Paper keys of the built-in experiments, in the order of the papers' table (:data:`PAPERS`).
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


def paper_of(module: str) -> str:
    """The key of the paper whose package holds ``module`` (``lazylab.experiments.KEY...``).

    Raises ValueError for a module outside the built-in papers' packages.

    >>> paper_of("lazylab.experiments.bailee.common")
    'bailee'
    """
    parts = module.split(".")
    key = parts[2] if parts[:2] == ["lazylab", "experiments"] and len(parts) > 2 else None
    if key is None or key not in PAPERS:
        raise ValueError(f"{module} is not in a paper's package lazylab.experiments.KEY "
                         f"(KEY one of {', '.join(PAPERS)})")
    return key
