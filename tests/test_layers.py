"""The import direction of PRODUCT.md's layers: a lower layer never imports a higher one."""

import ast
from pathlib import Path

import lazylab

ROOT = Path(lazylab.__file__).parent

#: Top-level module or package of lazylab -> layer number (0 = utilities).
LAYER = {
    "seeding": 0, "device": 0, "machine": 0, "gauss": 0, "errors": 0, "ids": 0, "bibtex": 0,
    "data": 1,
    "duals": 2, "activations": 2, "kernels": 2, "models": 2,
    "train": 3, "solve": 3, "estimators": 3,
    "theory": 4,
    "experiments": 5,
    "runner": 6, "store": 6, "report": 6, "robustness": 6, "cli": 6, "__main__": 6,
    "testing": 6,
}


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "lazylab" and len(parts) > 1 else None


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules a file of lazylab imports.

    ``from lazylab import x`` counts as importing ``lazylab.x``; relative imports are resolved
    against the file's package.
    """
    return _imports_of(path.read_text(), path.relative_to(ROOT.parent).with_suffix("").parts)


def _import_nodes(tree: ast.AST, rel: tuple[str, ...]):
    """``(module, names)`` for each import in ``tree``: ``import a.b`` gives ``("a.b", [])``,
    a ``from`` import its module (relative ones resolved against the file's package) and the
    names it takes."""
    package = list(rel[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield module, [a.name for a in node.names]


def _imports_of(text: str, rel: tuple[str, ...]) -> set[str]:
    out: set[str] = set()
    for module, names in _import_nodes(ast.parse(text), rel):
        if module == "lazylab":
            out.update(f"lazylab.{n}" for n in names)
        elif module:
            out.add(module)
    return out


def test_import_parsing_catches_every_form():
    text = ("from lazylab import experiments\nfrom .. import runner\n"
            "from ..theory import arora\nimport lazylab.cli\n")
    found = _imports_of(text, ("lazylab", "data", "probe"))
    assert {"lazylab.experiments", "lazylab.runner", "lazylab.theory", "lazylab.cli"} <= found


def test_every_module_has_a_layer():
    tops = {p.relative_to(ROOT).parts[0].removesuffix(".py") for p in ROOT.rglob("*.py")}
    tops.discard("__init__")
    assert tops <= set(LAYER), f"modules without a layer: {sorted(tops - set(LAYER))}"


def test_lower_layers_never_import_higher_ones():
    bad = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        if rel[0] == "__init__.py":
            continue
        mine = LAYER[rel[0].removesuffix(".py")]
        for mod in _imports(path):
            top = _top(mod)
            if top is not None and LAYER.get(top, -1) > mine:
                bad.append(f"{'/'.join(rel)} (layer {mine}) imports {mod} (layer {LAYER[top]})")
    assert not bad, "\n".join(bad)


def _targets_of(text: str, rel: tuple[str, ...]) -> set[str]:
    """Dotted candidates of everything a file imports, one per imported name:
    ``from lazylab.train import capture`` gives ``lazylab.train.capture`` (the submodule when
    there is one, else the graph falls back to the package), ``import a.b`` gives ``a.b``."""
    out: set[str] = set()
    for module, names in _import_nodes(ast.parse(text), rel):
        out.update([f"{module}.{n}" for n in names] if names else [module])
    return out


def _runtime_imports(path: Path) -> set[str]:
    """What a file imports at run time (:func:`_targets_of`): every import, in functions
    too, except those under ``if TYPE_CHECKING:`` (annotations only, never executed)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = [ast.Pass()]
    rel = path.relative_to(ROOT.parent).with_suffix("").parts
    return _targets_of(ast.unparse(tree), rel)


def _import_cycles() -> list[set[str]]:
    """Strongly connected components (more than one module) of lazylab's run-time import
    graph, function-level imports included (Tarjan)."""
    mods = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(
        ".__init__"): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for imp in _runtime_imports(path):
            parts = imp.split(".")
            while parts and ".".join(parts) not in mods:
                parts.pop()
            if parts and ".".join(parts) != name:
                deps.add(".".join(parts))
        graph[name] = deps
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    """No module imports, at top level or inside a function, one that imports it back
    (directly or through others): no circle, and no lazy import hiding one. Imports under
    ``if TYPE_CHECKING:`` are left out: they are never executed (annotations only)."""
    assert _import_cycles() == [], [sorted(c) for c in _import_cycles()]


def test_the_cycle_finder_finds_a_circle(tmp_path, monkeypatch):
    """Two modules importing each other inside functions form a circle the finder reports."""
    pkg = tmp_path / "lazylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from lazylab import b\n")
    (pkg / "b.py").write_text("from lazylab.a import f\n")
    # ``from package import submodule`` reaches the submodule, not the package's __init__
    (pkg / "sub").mkdir()
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("def g():\n    from lazylab.sub.d import h\n")
    (pkg / "sub" / "d.py").write_text("from lazylab.sub import c as alias\n")
    # an import under TYPE_CHECKING (annotations only) is no edge
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from lazylab import f\n")
    (pkg / "f.py").write_text("from lazylab.e import TYPE_CHECKING\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", pkg)
    assert sorted(map(sorted, _import_cycles())) == [["lazylab.a", "lazylab.b"],
                                                     ["lazylab.sub.c", "lazylab.sub.d"]]
