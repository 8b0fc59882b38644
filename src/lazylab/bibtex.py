"""BibTeX of the papers lazylab reproduces, by paper key (shown by ``lazylab show`` and on the
documentation's paper pages), built from the paper table :data:`lazylab.ids.PAPERS`
(CITATION.cff lists the same references)."""

from __future__ import annotations

import re
import textwrap

from lazylab.ids import PAPERS, Paper

# A word with two capitals (NTK, ResNet) keeps its case in BibTeX: braced.
_KEEP_CASE = re.compile(r"\b([A-Za-z]*[A-Z][a-z]*[A-Z][A-Za-z]*)\b")


def bibtex_entry(paper: Paper) -> str:
    """The ``@inproceedings`` entry of ``paper``, fields aligned, lines within 96 columns.

    >>> print(bibtex_entry(PAPERS["allenzhu"]).splitlines()[1])
      title     = {What Can {ResNet} Learn Efficiently, Going Beyond Kernels?},
    """
    fields = [("title", _KEEP_CASE.sub(r"{\1}", paper.title)),
              ("author", " and ".join(paper.authors)), ("booktitle", paper.venue),
              *paper.extra, ("year", str(paper.year)),
              ("url", paper.url)]
    lines = [textwrap.fill(f"{name:<10}= {{{value}}}", width=94, initial_indent="  ",
                           subsequent_indent=" " * 15, break_on_hyphens=False)
             for name, value in fields]
    return f"@inproceedings{{{paper.cite_key},\n" + ",\n".join(lines) + "\n}"


#: Every reproduced paper's BibTeX entry, by paper key.
BIBTEX: dict[str, str] = {key: bibtex_entry(paper) for key, paper in PAPERS.items()}


def bibtex(paper: str) -> str | None:
    """The BibTeX entry of a paper key (None for a paper lazylab does not ship, e.g. a
    plugin's)."""
    return BIBTEX.get(paper)
