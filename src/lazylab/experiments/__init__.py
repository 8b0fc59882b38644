"""Experiment registry: every reproducible figure, by id (ids are part of the contract)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lazylab.experiments.base import (
    COLUMNS,
    Claim,
    Experiment,
    ExperimentParams,
    Results,
    Series,
    Statement,
    row,
    worst_at,
)
from lazylab.experiments.code_identity import (
    LAZYLAB_ROOT,
    code_version,
    describe_code_change,
    package_root,
    source_hashes,
)
from lazylab.experiments.cost import (
    CONFIRM_SECONDS,
    PROCESS_BYTES,
    Estimate,
    anchor,
    check_cost,
    device_bytes,
    estimate,
    grid_of,
    known_grid,
    scaled_cost,
    seed_cost,
    size_of,
    unit_count_seconds,
)
from lazylab.experiments.grid_check import check_scales, check_unit_keys, duplicate_unit_keys
from lazylab.experiments.style import (
    ASYMPTOTIC,
    FINITE_D,
    bayes_line,
    display_label,
    finish,
    legend_handles,
    limit_line,
    method_color,
    method_marker,
    new_figure,
    series_line,
    series_points,
    sim_points,
    theory_line,
    width_axis,
)
from lazylab.experiments.toolkit import (
    K_SE,
    NO_COMPETING_LAW,
    Check,
    GridSearchResult,
    SlopeFit,
    SlopeRecord,
    SmallestN,
    all_of,
    crossing,
    default_resolution,
    grid_search,
    joint_claim,
    k_eff,
    level_claim,
    loglog_fit,
    match_claim,
    recorded_slopes,
    series_match_claim,
    series_slope_claim,
    slope_claim,
    smallest_n,
    smallest_n_chunked,
    sub_generator,
    unresolved,
)
from lazylab.ids import PAPERS as _PAPER_TABLE

__all__ = [
    # the registry and plugins
    "ENTRY_POINT_GROUP", "REGISTRY", "PAPERS", "register", "get_experiment", "all_experiments",
    "plugin_entry_points", "check_targets", "refused_plugins", "PluginWarning", "REFUSED",
    # the experiment contract: parameters, results, claims (experiments.base)
    "Claim", "Experiment", "ExperimentParams", "Results", "Series", "Statement", "COLUMNS", "row",
    "worst_at",
    # claim builders and shared tools (experiments.toolkit)
    "K_SE", "NO_COMPETING_LAW", "all_of", "GridSearchResult", "SlopeFit", "SlopeRecord",
    "SmallestN", "Check", "crossing", "default_resolution", "grid_search", "joint_claim", "k_eff",
    "level_claim", "loglog_fit", "match_claim", "recorded_slopes", "series_match_claim",
    "series_slope_claim", "slope_claim", "smallest_n", "smallest_n_chunked", "sub_generator",
    "unresolved",
    # the cost model and guard (experiments.cost)
    "CONFIRM_SECONDS", "PROCESS_BYTES", "Estimate", "anchor", "check_cost", "device_bytes",
    "estimate", "grid_of", "known_grid", "scaled_cost", "seed_cost", "size_of",
    "unit_count_seconds",
    # figure style shared by the experiments (experiments.style)
    "ASYMPTOTIC", "FINITE_D", "new_figure", "method_color", "method_marker", "display_label",
    "theory_line", "sim_points", "limit_line", "bayes_line", "width_axis", "finish",
    "legend_handles", "series_points", "series_line",
    # checks of an experiment's grid of units (experiments.grid_check)
    "check_scales", "check_unit_keys", "duplicate_unit_keys",
    # the code a stored unit was computed by (experiments.code_identity)
    "LAZYLAB_ROOT", "code_version", "describe_code_change", "package_root", "source_hashes",
]

REGISTRY: dict[str, Experiment] = {}

#: Paper keys (the short names used in experiment ids, the CLI and the docs) and each paper's
#: one-line citation, from the paper table :data:`lazylab.ids.PAPERS`.
PAPERS: dict[str, str] = {key: paper.citation for key, paper in _PAPER_TABLE.items()}


#: Paper-scale estimates projected by ``bench/bench_paper_scale.py --write-estimates`` (the
#: one-H100 model of every experiment at its paper parameters and seeds).
PAPER_ESTIMATES = Path(__file__).with_name("paper_estimates.json")


def _paper_estimates() -> dict[str, dict[str, float]]:
    try:
        return json.loads(PAPER_ESTIMATES.read_text())
    except (OSError, ValueError):
        return {}


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator adding an experiment to the registry. Its paper-scale estimate is the
    benchmark's projection where one was made (:data:`PAPER_ESTIMATES`): its groups, prepare
    and theory, plus the assembly of its outputs where that was measured.

    Refused with ValueError (TypeError for a signature): an id that is not a lower-case slug
    (:func:`lazylab.ids.id_problem`; the id names a folder and a lock file) and an id already
    registered. The grid is checked once the defining module is imported (``units`` may use
    names defined below the class): for a plugin when it loads (:func:`_add_plugin`), for the
    built-in experiments by the test suite."""
    exp = _checked(cls)
    est = _paper_estimates().get(cls.id, {})
    if est.get("paper_h100_seconds") is not None:  # the run's groups, then its outputs
        projected = est["paper_h100_seconds"] + est.get("paper_h100_assembly_seconds", 0.0)
        cls.est_seconds = {**cls.est_seconds, "paper": max(1.0, float(projected))}
    REGISTRY[cls.id] = exp
    return cls


def _check_id(exp_id: object, where: str) -> None:
    """ValueError unless ``exp_id`` is a valid id that no registered experiment has."""
    from lazylab.ids import EXPERIMENT_PAPERS, id_problem

    problem = id_problem(exp_id)
    if problem is not None:
        raise ValueError(f"{where}: {problem}")
    if exp_id in REGISTRY:
        owner = "a built-in experiment" if exp_id in EXPERIMENT_PAPERS else "another experiment"
        raise ValueError(f"duplicate experiment id {exp_id!r} ({owner} has it)")


def _checked(cls: type[Experiment]) -> Experiment:
    """The instance to register, after the checks :func:`register` documents."""
    _check_id(getattr(cls, "id", None), f"experiment class {cls.__name__}")
    _check_prep(cls)
    return cls()


def _check_prep(cls: type[Experiment]) -> None:
    """TypeError unless ``run_unit``, ``run_group`` and ``theory`` accept the keyword ``prep``
    (the runner always passes the run's :meth:`Experiment.prepare` output)."""
    import inspect

    for name in ("run_unit", "run_group", "theory"):
        params = inspect.signature(getattr(cls, name)).parameters
        if "prep" not in params and not any(v.kind is v.VAR_KEYWORD for v in params.values()):
            raise TypeError(f"{cls.__name__}.{name} must accept the keyword argument prep "
                            f"(the run's prepare() output; add `prep=None`)")


#: The entry-point group through which packages add experiments: each entry names a module
#: whose import registers experiments (``@register``), or an Experiment subclass. lazylab's own
#: paper packages are entries of the group too (pyproject.toml).
ENTRY_POINT_GROUP = "lazylab.experiments"

_loaded = False


def _builtin_modules() -> list[str]:
    """lazylab's paper packages (the subpackages of this package), found on disk."""
    import pkgutil

    return sorted(f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if m.ispkg)


def plugin_entry_points() -> list[Any]:
    """Installed entry points of :data:`ENTRY_POINT_GROUP` that are not lazylab's own."""
    from importlib.metadata import entry_points

    return [ep for ep in entry_points(group=ENTRY_POINT_GROUP)
            if not ep.value.split(":")[0].startswith(__name__ + ".")]


#: Plugins that failed to load or were refused at registration: entry-point name -> one line
#: naming the plugin and why (:func:`check_targets` turns a request for one into InputError).
REFUSED: dict[str, str] = {}


class PluginWarning(RuntimeWarning):
    """Warned once per refused plugin with its :data:`REFUSED` line (a category of its own, so
    that a front end can show it as its own one-line message)."""


def _plugin_label(ep: Any) -> str:
    """``'NAME' (VALUE, distribution DIST)``: enough to find the package to fix or remove."""
    dist = getattr(getattr(ep, "dist", None), "name", None)
    return f"{ep.name!r} ({ep.value}" + (f", distribution {dist})" if dist else ")")


def _add_plugin(ep: Any) -> None:
    """Load one entry point and register what it names; ValueError / TypeError if refused.

    An entry naming an Experiment class (or instance) must be named by its id; an entry naming
    a module registers its experiments by importing it, and must be named by their paper key
    or an id among them (the command line knows installed plugins by these names). Each
    experiment's grid must not repeat a unit key at any scale it declares.
    """
    from lazylab.experiments.grid_check import check_scales
    from lazylab.ids import id_problem

    problem = id_problem(ep.name, "entry-point name")
    if problem is not None:
        raise ValueError(problem)
    before = set(REGISTRY)
    _register_object(ep.name, ep.load())
    added = [REGISTRY[k] for k in REGISTRY if k not in before]
    if not added:
        raise ValueError("it registers no experiment (name an Experiment class, or a module "
                         "that registers experiments with @register)")
    names = {e.id for e in added} | {e.paper for e in added}
    if ep.name not in names:
        raise ValueError(f"the entry-point name must be the paper key or an id of the "
                         f"experiments it registers ({', '.join(sorted(names))})")
    for exp in added:
        check_scales(exp)


def _register_object(name: str, obj: Any) -> None:
    """Register an entry point's Experiment class or instance (named ``name``); a module
    registered its experiments when it was imported."""
    import inspect

    if not (inspect.isclass(obj) and issubclass(obj, Experiment) or isinstance(obj, Experiment)):
        return
    cls = obj if inspect.isclass(obj) else type(obj)
    _check_id(getattr(obj, "id", None), f"experiment class {cls.__name__}")
    if obj.id != name:
        raise ValueError(f"the entry-point name must be the experiment id {obj.id!r}")
    if inspect.isclass(obj):
        register(obj)
    else:
        REGISTRY[obj.id] = obj


def _load_plugin(ep: Any) -> None:
    """Register one plugin; a plugin that fails or is refused must not break lazylab: its
    experiments are removed again, and it is recorded in :data:`REFUSED` and warned about."""
    import warnings

    before = set(REGISTRY)
    try:
        _add_plugin(ep)
    except Exception as e:
        for k in set(REGISTRY) - before:
            del REGISTRY[k]
        why = str(e) if isinstance(e, ValueError | TypeError) else f"{type(e).__name__}: {e}"
        REFUSED[ep.name] = f"lazylab plugin {_plugin_label(ep)} refused: {why}"
        warnings.warn(REFUSED[ep.name], PluginWarning, stacklevel=3)


def _load_all() -> None:
    """Import the built-in paper packages, then every installed plugin (once)."""
    global _loaded
    if _loaded:
        return
    import importlib

    _loaded = True
    for name in _builtin_modules():
        importlib.import_module(name)
    for ep in plugin_entry_points():
        _load_plugin(ep)


def refused_plugins() -> dict[str, str]:
    """Entry-point name -> why, for every installed plugin that is not registered."""
    _load_all()
    return dict(REFUSED)


def check_targets(targets: Sequence[str]) -> None:
    """InputError (exit 2) with the plugin's one line when ``targets`` names a refused plugin,
    or is ``all`` while any plugin is refused (a run of "all" would otherwise succeed without
    it). A name that is also a registered id or paper key (a plugin that tried to reuse a
    built-in id) means the registered experiments; other targets, and ``lazylab list``, are
    unaffected."""
    from lazylab.errors import InputError

    refused = refused_plugins()
    taken = set(REGISTRY) | {e.paper for e in REGISTRY.values()}
    for t in targets:
        if t in refused and t not in taken:
            raise InputError(refused[t])
        if t == "all" and refused:
            name = next(iter(refused))
            raise InputError(f"{refused[name]}; `all` includes it: fix or uninstall the plugin, "
                             "or name the experiments to run")


def get_experiment(exp_id: str) -> Experiment:
    _load_all()
    if exp_id not in REGISTRY:
        raise KeyError(exp_id)
    return REGISTRY[exp_id]


def all_experiments() -> list[Experiment]:
    _load_all()
    return list(REGISTRY.values())
