"""Experiment registry: every reproducible figure, by id (ids are part of the contract)."""

from __future__ import annotations

from lazylab.experiments.base import Claim, Experiment, Results

__all__ = [
    "REGISTRY", "PAPERS", "register", "get_experiment", "all_experiments", "Claim", "Experiment",
    "Results",
]

REGISTRY: dict[str, Experiment] = {}

#: Paper keys as in PRODUCT.md.
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


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator adding an experiment to the registry."""
    if cls.id in REGISTRY:
        raise ValueError(f"duplicate experiment id {cls.id!r}")
    REGISTRY[cls.id] = cls()
    return cls


#: Modules whose import registers experiments (one per paper).
PAPER_MODULES: tuple[str, ...] = (
    "lazylab.experiments.allenzhu",
    "lazylab.experiments.arora",
    "lazylab.experiments.bailee",
    "lazylab.experiments.ghorbani",
    "lazylab.experiments.nichani",
)


def _load_all() -> None:
    import importlib

    for name in PAPER_MODULES:
        importlib.import_module(name)


def get_experiment(exp_id: str) -> Experiment:
    _load_all()
    if exp_id not in REGISTRY:
        raise KeyError(exp_id)
    return REGISTRY[exp_id]


def all_experiments() -> list[Experiment]:
    _load_all()
    return list(REGISTRY.values())
