"""Griffe extension: lazylab's docstrings rewritten for mkdocstrings (the API reference).

The docstrings are written for the terminal (``help()``) and for Sphinx-era habits; the site
renders them with mkdocstrings' numpy parser. This extension rewrites each docstring's text once
the package is loaded, without touching the sources:

- Sphinx roles (:func:`x`, :class:`~a.b.C`, :mod:`m`, :meth:`C.f`, :attr:`a`, :data:`d`,
  :exc:`E`) become cross-references to the object's page when the target is documented, a code
  span otherwise (``<autoref ... optional>``: autorefs leaves an unresolved one as plain code, so
  a reference to torch or numpy is never a broken link);
- reStructuredText double backticks become Markdown code spans;
- ``name : description`` lines in Parameters / Attributes sections become numpydoc items (the
  name on its own line, the description indented below it), one item per name where one line
  lists several (numpydoc would otherwise give every name the type and default of the first);
  prose after a section's items becomes a Notes block instead of being dropped;
- a Returns section written as prose becomes the description of the return value;
- doctest blocks outside an Examples section become ``pycon`` code blocks (otherwise Markdown
  joins them into one paragraph and reads ``x[:44]`` as a reference link); an ``Example``
  heading is read as ``Examples``.

The rewrite is pure text -> text (:func:`rewrite`), so tests check it without building the site.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterator
from itertools import pairwise

import griffe

Resolver = Callable[[str], "str | None"]

ROLE = re.compile(r":(?:py:)?(func|class|mod|meth|attr|data|exc|obj|const):`([^`]+)`")
DOUBLE_TICKS = re.compile(r"``(.+?)``")
HEADER = re.compile(r"^-{3,}\s*$")
NAME = r"\*{0,2}[A-Za-z_][A-Za-z0-9_]*"
ITEM = re.compile(rf"^(?P<names>{NAME}(?:,\s*{NAME})*)(?:\s+:\s*(?P<rest>.*))?$")
PARAM_SECTIONS = {"parameters", "other parameters", "attributes"}
RETURN_SECTIONS = {"returns", "yields"}


def _code(text: str) -> str:
    """A Markdown code span for ``text`` (a longer fence when ``text`` holds a backtick)."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _role(match: re.Match[str], resolve: Resolver) -> str:
    text = re.sub(r"\s+", " ", match.group(2)).strip()  # a role may wrap onto the next line
    label = re.match(r"^(.*?)\s*<([^>]+)>$", text)  # :func:`shown text <target>`
    shown, target = (label.group(1), label.group(2)) if label else (text, text)
    target = target.replace(" ", "").lstrip("~.").removesuffix("()")
    if not label and text.startswith("~"):
        shown = target.rsplit(".", 1)[-1]
    elif not label:
        shown = text.lstrip(".").replace(". ", ".")
    path = resolve(target)
    if path is None:
        return _code(shown)
    # autorefs turns this into a link when `path` is documented, and into plain text (the code
    # span) when it is not: no broken-reference warning for targets outside the API pages.
    return f'<autoref identifier="{path}" optional>{_code(shown)}</autoref>'


def inline(text: str, resolve: Resolver) -> str:
    """Roles and double backticks of one line of prose converted to Markdown."""
    text = ROLE.sub(lambda m: _role(m, resolve), text)
    return DOUBLE_TICKS.sub(lambda m: _code(m.group(1)), text)


def _fence_doctests(lines: list[str]) -> list[str]:
    """Doctest runs (``>>>`` to the next blank line) fenced as ``pycon`` code blocks."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        pad = lines[i][: len(lines[i]) - len(stripped)]
        out.append(f"{pad}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{pad}```")
    return out


def _sections(lines: list[str]) -> Iterator[tuple[str | None, list[str]]]:
    """(title, body lines) blocks of a numpydoc docstring; title None for the leading text."""
    title: str | None = None
    body: list[str] = []
    i = 0
    while i < len(lines):
        known = lines[i].strip().lower() in PARAM_SECTIONS | RETURN_SECTIONS | {"examples"}
        if (i + 1 < len(lines) and lines[i].strip() and not lines[i].startswith(" ")
                and HEADER.match(lines[i + 1]) and (known or i == 0 or not lines[i - 1].strip())):
            yield title, body
            title, body = lines[i].strip(), []
            i += 2
            continue
        body.append(lines[i])
        i += 1
    yield title, body


def _items(body: list[str]) -> tuple[list[list[str]], list[str]]:
    """A parameter-like section's items (first line, continuation lines) and trailing prose."""
    items: list[list[str]] = []
    prose: list[str] = []
    for line in body:
        if prose:
            prose.append(line)
        elif not line.strip():
            if items:
                items[-1].append("")
        elif line.startswith(" ") and items:
            items[-1].append(line)
        elif ITEM.match(line):
            items.append([line])
        else:  # an unindented paragraph after the items: numpydoc has no place for it
            prose.append(line)
    return items, prose


def _split(item: list[str], known: set[str]) -> list[list[str]]:
    """One item that packs several (``tol : ...; rank : ...``) split at each ``; name :`` whose
    name is a known parameter or member, or a fitted attribute (trailing underscore)."""
    text = "\n".join(item)
    cuts = [m.start(1) for m in re.finditer(rf";\s+({NAME})\s+:\s", text)
            if m.group(1) in known or m.group(1).endswith("_")]
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b].rstrip().removesuffix(";") for a, b in pairwise(bounds)]
    return [p.split("\n") for p in pieces]


def _entries(body: list[str], known: set[str]) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(name, description lines) of a parameter-like section, one entry per name, and the
    section's trailing prose."""
    items, prose = _items(body)
    entries: list[tuple[str, list[str]]] = []
    for item in (piece for it in items for piece in _split(it, known)):
        m = ITEM.match(item[0])
        if m is None:  # a split piece always starts with `name :`; keep anything else as text
            entries.append(("", item))
            continue
        rest = (m.group("rest") or "").strip()
        more = textwrap.dedent("\n".join(item[1:])).split("\n") if item[1:] else []
        while more and not more[-1]:
            more.pop()
        desc = ([rest] if rest else []) + more
        if desc and re.match(r"^([>#+*-]|\d+\.)", desc[0]):
            desc[0] = "\\" + desc[0]  # ">= 0" is a description, not a Markdown block quote
        entries += [(name, desc) for name in re.split(r",\s*", m.group("names"))]
    return entries, prose


def _param_section(title: str, body: list[str], known: set[str]) -> list[str]:
    entries, prose = _entries(body, known)
    out = [title, "-" * len(title)]
    for name, desc in entries:
        out += [name, *(f"    {ln}" if ln else "" for ln in desc)]
    out.append("")
    if prose:
        out += ["Notes", "-----", *prose, ""]
    return out


def _qualified_section(title: str, body: list[str], known: set[str]) -> list[str]:
    """``Attributes (after fit)``: a titled block (numpydoc has no such section) whose items
    are a bullet list."""
    entries, prose = _entries(body, known)
    out = [title, "-" * len(title)]
    for name, desc in entries:
        out += [f"- `{name}`: " + " ".join(desc)] if name else [" ".join(desc)]
    return [*out, "", *prose]


def _returns_section(title: str, body: list[str]) -> list[str]:
    text = list(body)
    while text and not text[-1].strip():
        text.pop()
    while text and not text[0].strip():
        text.pop(0)
    if not text:
        return []
    first = re.match(rf"^({NAME})\s+:\s*(.*)$", text[0])
    if len(text) == 1 and re.fullmatch(r"[A-Za-z_][\w.\[\], |]*", text[0].strip()):
        head, desc = [text[0]], []  # a bare type, as numpydoc writes it
    elif first:
        head, desc = [f"{first.group(1)} :"], [first.group(2), *text[1:]]
    else:
        head, desc = [":"], text
    return [title, "-" * len(title), *head,
            *(f"    {ln.strip()}" if ln.strip() else "" for ln in desc), ""]


def _convert_prose(lines: list[str], resolve: Resolver) -> list[str]:
    """Roles and backticks converted in every run of prose lines (a role may wrap onto the next
    line); fenced code and doctest lines are left as written."""
    out: list[str] = []
    chunk: list[str] = []
    fenced = False
    for line in lines:
        fence = line.lstrip().startswith("```")
        code = fenced or fence or line.lstrip().startswith((">>>", "..."))
        if fence:
            fenced = not fenced
        if code:
            out += inline("\n".join(chunk), resolve).split("\n") if chunk else []
            chunk = []
            out.append(line)
        else:
            chunk.append(line)
    return out + (inline("\n".join(chunk), resolve).split("\n") if chunk else [])


def rewrite(doc: str, resolve: Resolver = lambda target: None,
            known: frozenset[str] = frozenset()) -> str:
    """The docstring ``doc`` (as griffe holds it: dedented) rewritten for mkdocstrings' numpy
    parser and Markdown; ``resolve`` maps a role's target to a documented object path, or None
    (then the role becomes a plain code span); ``known`` are the object's parameter and
    member names."""
    out: list[str] = []
    for title, body in _sections(doc.splitlines()):
        key = (title or "").lower()
        if title is None:
            out += _fence_doctests(body)
        elif key in ("examples", "example"):
            out += ["Examples", "--------", *body]
        elif key in PARAM_SECTIONS:
            out += _param_section(title, body, set(known))
        elif re.match(r"^(attributes|parameters)\s*\(", key):
            out += _qualified_section(title, body, set(known))
        elif key in RETURN_SECTIONS:
            out += _returns_section(title, body)
        else:
            out += [title, "-" * len(title), *_fence_doctests(body)]
    return "\n".join(_convert_prose(out, resolve)).rstrip() + "\n"


def _resolver(obj: griffe.Object) -> Resolver:
    """A role's target looked up the way Python would from ``obj``: its own members, then its
    enclosing class and module scopes, then as an absolute path under the package."""
    root = obj.package

    def lookup(scope: griffe.Object | griffe.Alias, parts: list[str]) -> str | None:
        node = scope
        for part in parts:
            try:
                node = node.members[part]
            except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                return None
        try:
            return node.final_target.path if isinstance(node, griffe.Alias) else node.path
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return node.target_path if isinstance(node, griffe.Alias) else None

    def resolve(target: str) -> str | None:
        parts = target.split(".")
        if parts[0] == root.name:
            return lookup(root, parts[1:])
        scope: griffe.Object | None = obj
        while scope is not None:
            if not scope.is_function and (found := lookup(scope, parts)):
                return found
            scope = scope.parent
        return None

    return resolve


def _walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]


def _known(obj: griffe.Object) -> frozenset[str]:
    names = set(obj.members)
    if obj.is_function or obj.is_class:
        try:
            names |= {p.name for p in obj.parameters}  # type: ignore[union-attr]
        except (AttributeError, KeyError, griffe.AliasResolutionError):
            pass  # a class without a documented __init__ has no parameters to add
    return frozenset(names)


class SphinxToMarkdown(griffe.Extension):
    """Every docstring of the loaded package passed through :func:`rewrite`."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: object) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value, _resolver(obj), _known(obj))
