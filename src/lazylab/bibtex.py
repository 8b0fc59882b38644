"""BibTeX of the papers lazylab reproduces, by paper key (shown by ``lazylab show`` and on the
documentation's paper pages), built from the paper table :data:`lazylab.papers.PAPERS`
(CITATION.cff lists the same references)."""

from __future__ import annotations

from lazylab.papers import PAPERS, bibtex_entry

#: Every reproduced paper's BibTeX entry, by paper key.
BIBTEX: dict[str, str] = {key: bibtex_entry(paper) for key, paper in PAPERS.items()}


def bibtex(paper: str) -> str | None:
    """The BibTeX entry of a paper key (None for a paper lazylab does not ship, e.g. a
    plugin's)."""
    return BIBTEX.get(paper)
