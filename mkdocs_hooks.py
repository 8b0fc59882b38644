"""mkdocs hook: the per-paper pages and their navigation, generated at build time from the
paper table (:data:`lazylab.ids.PAPERS`) and the experiment registry.

Each page lists the paper's experiments (id, figure, what it shows, estimated times), the
experiment's figure where one is committed (the quick-scale figure from ``docs/figures/ID.png``
or ``docs/ID.png``, and the paper-scale runs' figures from ``docs/paper-scale/ID-*.png``), the
module docstring that states the protocol and what differs from the paper (rendered by
mkdocstrings), every claim's statement at quick scale, and a link to the experiment's
``docs/protocols/ID.md`` page where one records how its quick protocol was chosen. The
navigation's ``Papers`` section (empty in mkdocs.yml) lists one page per row of the table.
Nothing generated is committed, so the pages cannot drift from the code.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from lazylab.ids import PAPERS

DOCS = Path(__file__).resolve().parent / "docs"
#: The navigation section the hook fills with the paper pages.
NAV_SECTION = "Papers"


def _duration(sec: float | None) -> str:
    if sec is None:
        return "?"
    return f"{sec:.0f} s" if sec < 90 else (f"{sec / 60:.0f} min" if sec < 5400
                                            else f"{sec / 3600:.1f} h")


def _figures(eid: str, quick_seconds: float | None) -> list[str]:
    """Markdown showing the experiment's committed figures (paths relative to papers/KEY.md)."""
    lines = []
    quick = [p for p in (DOCS / "figures" / f"{eid}.png", DOCS / f"{eid}.png") if p.is_file()]
    if quick:
        rel = quick[0].relative_to(DOCS).as_posix()
        lines += [f"![{eid} at quick scale](../{rel})", "",
                  f"*At quick scale (`lazylab reproduce {eid}`).*", ""]
    else:
        lines += [f"`lazylab reproduce {eid}` draws its quick-scale figure (`{eid}.png` in the "
                  f"output folder) in about {_duration(quick_seconds)}.", ""]
    for p in sorted((DOCS / "paper-scale").glob(f"{eid}-*.png")):
        run = p.stem.removeprefix(f"{eid}-")
        lines += [f"![{eid} at paper scale ({run})](../paper-scale/{p.name})", "",
                  f"*At paper scale: the `{run}` run of [Paper scale](../paper-scale.md).*", ""]
    return lines


def _page(key: str) -> str:
    from lazylab.experiments import all_experiments

    paper = PAPERS[key]
    exps = [e for e in all_experiments()
            if e.paper == key and type(e).__module__.startswith("lazylab.experiments.")]
    lines = [f"# {paper.citation}", "", f"arXiv: [{paper.arxiv}]({paper.url})", "",
             f"lazylab reproduces {len(exps)} experiment(s) of this paper. Each runs with "
             "`lazylab reproduce ID` (quick scale, a 2-core CPU) or `--scale paper` (the "
             "paper's sizes, one GPU); every claim's verdict, with its measured and expected "
             "numbers, tolerance and error model, is written to `claims.json` and the report.",
             ""]
    from lazylab.bibtex import bibtex

    entry = bibtex(key)
    if entry:
        lines += ["Cite the paper as:", "", "```bibtex", entry, "```", ""]
    for e in exps:
        p = e.resolve("quick")
        lines += [f"## `{e.id}`: {e.figure}", "", e.summary, "",
                  f"Estimated time: {_duration(e.est_seconds.get('quick'))} at quick scale, "
                  f"{_duration(e.est_seconds.get('paper'))} at paper scale.", "",
                  *_figures(e.id, e.est_seconds.get("quick")),
                  "**Claims** (at quick scale):", ""]
        lines += [f"- `{cid}`: {text}" for cid, text in e.statements(p).items()]
        lines += ["", "**Protocol** (the experiment's module documentation):", "",
                  f"::: {inspect.getmodule(type(e)).__name__}",
                  "    options:", "      members: false", "      show_root_heading: false",
                  ""]
        if (DOCS / "protocols" / f"{e.id}.md").is_file():
            lines += [f"How the quick protocol was chosen (the measurements behind it): "
                      f"[protocols/{e.id}.md](../protocols/{e.id}.md).", ""]
    return "\n".join(lines)


def paper_nav() -> list[dict[str, str]]:
    """The ``Papers`` navigation section: one ``{label: page}`` per row of the paper table."""
    return [{paper.short: paper.page} for paper in PAPERS.values()]


def on_config(config):
    """Fill the navigation's (empty) ``Papers`` section from the paper table."""
    sections = [item for item in config.nav or [] if isinstance(item, dict) and NAV_SECTION in item]
    if len(sections) != 1:
        raise ValueError(f"mkdocs.yml's nav needs exactly one '{NAV_SECTION}' section for the "
                         f"paper pages; found {len(sections)}")
    sections[0][NAV_SECTION] = paper_nav()
    return config


def on_files(files, config):
    # Imported here so that the page builders above work without the docs extra (tests).
    from mkdocs.structure.files import File

    for key, paper in PAPERS.items():
        files.append(File.generated(config, paper.page, content=_page(key)))
    return files
