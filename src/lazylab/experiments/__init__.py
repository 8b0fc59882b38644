"""Experiment registry: every reproducible figure, by id (ids are part of the contract)."""

from __future__ import annotations

import json
from pathlib import Path

from lazylab.experiments.base import Claim, Experiment, Results

__all__ = [
    "ENTRY_POINT_GROUP", "REGISTRY", "PAPERS", "register", "get_experiment", "all_experiments",
    "plugin_entry_points", "Claim", "Experiment", "Results",
]

REGISTRY: dict[str, Experiment] = {}

#: Paper keys (the short names used in experiment ids, the CLI and the docs).
PAPERS = {
    "arora": "Arora, Du, Hu, Li, Wang 2019, Fine-Grained Analysis of Optimization and "
             "Generalization for Overparameterized Two-Layer Neural Networks",
    "ghorbani": "Ghorbani, Mei, Misiakiewicz, Montanari 2019, Limitations of Lazy Training of "
                "Two-layers Neural Networks",
    "bailee": "Bai, Lee 2020, Beyond Linearization: On Quadratic and Higher-Order Approximation "
              "of Wide Neural Networks",
    "nichani": "Nichani, Bai, Lee 2022, Identifying good directions to escape the NTK regime",
    "allenzhu": "Allen-Zhu, Li 2019, What Can ResNet Learn Efficiently, Going Beyond Kernels?",
}


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
    and theory, plus the assembly of its outputs where that was measured."""
    if cls.id in REGISTRY:
        raise ValueError(f"duplicate experiment id {cls.id!r}")
    _check_prep(cls)
    est = _paper_estimates().get(cls.id, {})
    if est.get("paper_h100_seconds") is not None:  # the run's groups, then its outputs
        projected = est["paper_h100_seconds"] + est.get("paper_h100_assembly_seconds", 0.0)
        cls.est_seconds = {**cls.est_seconds, "paper": max(1.0, float(projected))}
    REGISTRY[cls.id] = cls()
    return cls


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


def plugin_entry_points() -> list:
    """Installed entry points of :data:`ENTRY_POINT_GROUP` that are not lazylab's own."""
    from importlib.metadata import entry_points

    return [ep for ep in entry_points(group=ENTRY_POINT_GROUP)
            if not ep.value.split(":")[0].startswith(__name__ + ".")]


def _load_plugin(ep) -> None:
    import inspect
    import warnings

    try:
        obj = ep.load()
    except Exception as e:  # a broken plugin must not break lazylab: say so and go on
        warnings.warn(f"lazylab plugin {ep.name!r} ({ep.value}) failed to load: "
                      f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)
        return
    if inspect.isclass(obj) and issubclass(obj, Experiment) and obj.id not in REGISTRY:
        register(obj)
    elif isinstance(obj, Experiment) and obj.id not in REGISTRY:
        REGISTRY[obj.id] = obj


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


def get_experiment(exp_id: str) -> Experiment:
    _load_all()
    if exp_id not in REGISTRY:
        raise KeyError(exp_id)
    return REGISTRY[exp_id]


def all_experiments() -> list[Experiment]:
    _load_all()
    return list(REGISTRY.values())
