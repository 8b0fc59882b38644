"""The public face: public names live in the packages' ``__init__`` modules (as neural-tangents'
``stax`` re-exports its layers), each package's ``__all__`` resolves, and the five papers are
listed once (:data:`lazylab.ids.PAPERS`) with everything else derived from that table."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import lazylab
from lazylab.bibtex import bibtex_entry
from lazylab.ids import PAPERS, paper_of

SRC = Path(lazylab.__file__).resolve().parent
ROOT = SRC.parents[1]

# Packages whose ``__init__`` has no ``__all__`` yet.
PACKAGES_WITHOUT_ALL: tuple[str, ...] = ()


def _declares_all(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    targets = [t for node in tree.body if isinstance(node, ast.Assign) for t in node.targets]
    targets += [node.target for node in tree.body if isinstance(node, ast.AnnAssign)]
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def _packages() -> list[str]:
    """Every package of lazylab, as ``lazylab.a.b``."""
    return sorted("lazylab" + "".join(f".{p}" for p in init.parent.relative_to(SRC).parts)
                  for init in SRC.rglob("__init__.py"))


def test_no_module_outside_a_package_init_declares_all():
    offending = sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py")
                       if p.name != "__init__.py" and _declares_all(p))
    assert offending == [], ("public names belong in the package __init__ (move these "
                             f"__all__ there): {offending}")


def test_the_rule_sees_an_all_declaration(tmp_path):
    (tmp_path / "mod.py").write_text('__all__ = ["f"]\n\n\ndef f():\n    pass\n')
    (tmp_path / "ann.py").write_text("__all__: list[str] = []\n")
    (tmp_path / "none.py").write_text("names = ['__all__']\n")
    assert [_declares_all(tmp_path / n) for n in ("mod.py", "ann.py", "none.py")] == [
        True, True, False]


@pytest.mark.parametrize("package", _packages())
def test_every_name_in_a_package_all_resolves(package):
    module = importlib.import_module(package)
    rel = package.removeprefix("lazylab").lstrip(".").replace(".", "/")
    if not hasattr(module, "__all__"):
        assert rel in PACKAGES_WITHOUT_ALL, f"{package} has no __all__"
        return
    names = list(module.__all__)
    assert len(names) == len(set(names)), f"{package}.__all__ lists a name twice"
    assert [n for n in names if n.startswith("_") and n != "__version__"] == []
    missing = [n for n in names if not hasattr(module, n)]
    assert missing == [], f"{package}.__all__ names what it does not define: {missing}"


#: Package names that are a function of the same name as their module (documented that way).
SHADOWING_FUNCTIONS = ("lazylab.solve.nt_least_squares",)


@pytest.mark.parametrize("package", _packages())
def test_no_package_name_hides_its_submodule(package):
    """``from lazylab.runner import assemble`` must give the module: a package exporting a
    function named like one of its submodules would hide it after the first import."""
    import pkgutil
    import types

    module = importlib.import_module(package)
    hidden = [f"{package}.{sub.name}" for sub in pkgutil.iter_modules(module.__path__)
              if not isinstance(getattr(module, sub.name, types), types.ModuleType)
              and f"{package}.{sub.name}" not in SHADOWING_FUNCTIONS]
    assert hidden == [], f"names that hide a submodule: {hidden}"


def test_no_top_level_name_shadows_a_module():
    modules = {p.stem for p in SRC.glob("*.py")}
    modules |= {p.parent.name for p in SRC.glob("*/__init__.py")}
    assert sorted(set(lazylab.__all__) & modules) == []


def test_import_lazylab_stays_light_and_unknown_names_fail():
    import subprocess
    import sys

    code = ("import sys, lazylab\nprint('torch' in sys.modules)\n"
            "print(type(lazylab.get_activation).__name__, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["False", "function", "True"], out.stdout + out.stderr
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        lazylab.nosuch  # noqa: B018


# ---- one paper table ---------------------------------------------------------------------

def test_paper_keys_citations_and_bibtex_come_from_the_table():
    from lazylab.bibtex import BIBTEX, bibtex
    from lazylab.experiments import PAPERS as CITATIONS
    from lazylab.ids import PAPER_KEYS

    keys = tuple(PAPERS)
    assert PAPER_KEYS == keys and tuple(CITATIONS) == keys and tuple(BIBTEX) == keys
    for key, paper in PAPERS.items():
        assert CITATIONS[key].startswith(f"{paper.families[0]}, ") or len(paper.families) == 1
        assert str(paper.year) in CITATIONS[key] and paper.title in CITATIONS[key]
        assert bibtex(key) == bibtex_entry(paper)
        assert re.fullmatch(r"\d{4}\.\d{4,5}", paper.arxiv)
    assert bibtex("not-a-paper") is None


def test_bibtex_entries_are_well_formed():
    for paper in PAPERS.values():
        entry = bibtex_entry(paper)
        assert entry.startswith(f"@inproceedings{{{paper.cite_key},\n") and entry.endswith("\n}")
        assert max(len(line) for line in entry.splitlines()) <= 96
        assert entry.count("{") == entry.count("}")
        assert f"year      = {{{paper.year}}}" in entry and paper.url in entry


def test_every_builtin_experiment_belongs_to_its_package_paper():
    from lazylab.experiments import all_experiments

    builtin = [e for e in all_experiments()
               if type(e).__module__.startswith("lazylab.experiments.")]
    assert {e.paper for e in builtin} == set(PAPERS)
    for e in builtin:
        assert e.paper == paper_of(type(e).__module__), e.id


def test_paper_of_refuses_a_module_outside_the_papers():
    with pytest.raises(ValueError, match="not in a paper's package"):
        paper_of("lazylab.experiments.toolkit")
    with pytest.raises(ValueError, match="not in a paper's package"):
        paper_of("mypkg.arora")


def test_citation_cff_lists_the_same_papers():
    cff = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    titles = re.findall(r'^\s+title: "(.*)"$', cff, flags=re.M)
    assert len(titles) == len(PAPERS)
    for paper in PAPERS.values():
        assert paper.title.lower() in [t.lower() for t in titles], paper.key
        assert f"year: {paper.year}" in cff
        for family in paper.families:
            assert f"family-names: {family}" in cff


def test_docs_navigation_lists_the_paper_pages_from_the_table():
    pytest.importorskip("mkdocs")
    import sys

    sys.path.insert(0, str(ROOT))
    try:
        hooks = importlib.import_module("mkdocs_hooks")
    finally:
        sys.path.remove(str(ROOT))
    nav = hooks.paper_nav()
    assert nav == [{p.short: f"papers/{p.key}.md"} for p in PAPERS.values()]
    assert nav[0] == {"Arora et al. 2019": "papers/arora.md"}
    assert {"Bai & Lee 2020": "papers/bailee.md"} in nav

    class Config(dict):
        nav: list

    config = Config()
    config.nav = [{"Home": "index.md"}, {hooks.NAV_SECTION: []}]
    assert hooks.on_config(config).nav[1] == {hooks.NAV_SECTION: nav}
    config.nav = [{"Home": "index.md"}]
    with pytest.raises(ValueError, match="exactly one 'Papers' section"):
        hooks.on_config(config)
    yml = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^  - Papers: \[\]$", yml, flags=re.M)
    assert "papers/" not in yml


def test_docs_home_page_links_every_paper_page_in_table_order():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = re.findall(r"\(papers/([a-z0-9-]+)\.md\)", index)
    assert linked == list(PAPERS)
