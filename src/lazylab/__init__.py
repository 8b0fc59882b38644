"""lazylab: wide networks in the lazy (NTK) regime and beyond.

Layers (imports go downward only): ``data`` -> nn math (``activations``, ``kernels``,
``models``) -> ``train`` / ``solve`` -> ``theory`` -> ``experiments`` -> ``runner``, ``store``,
``report``, ``cli``.

The public names live in the packages' ``__init__`` modules: :mod:`lazylab.data`,
:mod:`lazylab.duals`, :mod:`lazylab.kernels`, :mod:`lazylab.models`, :mod:`lazylab.train`,
:mod:`lazylab.solve`, :mod:`lazylab.theory`, :mod:`lazylab.experiments` and
:mod:`lazylab.runner`; this package's ``__all__`` adds the names of its top-level modules
(errors, activations, seeding, devices, the store, the report, the paper table, the plugin
checks of :mod:`lazylab.testing` and the scikit-learn estimators of :mod:`lazylab.estimators`).
They are imported on first use, so ``import lazylab`` stays light (no torch). The command line
is ``lazylab.cli.main``.

Importing lazylab before torch sets ``OMP_WAIT_POLICY=PASSIVE`` unless it is set already:
torch's OpenMP threads then sleep between parallel regions instead of spinning. lazylab's
small GEMMs (100 x 30) hand work to OpenMP thousands of times a second, and on a loaded
machine spinning threads steal the cores the busy ones need (bench/bench_threads.py measures
it). Set the variable yourself, before importing torch, to choose otherwise.
"""

from __future__ import annotations

import os as _os
from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.2.0"

if TYPE_CHECKING:
    from lazylab.activations import ACTIVATIONS, Activation, get_activation
    from lazylab.device import available_devices, memory_budget, resolve_device, set_memory_budget
    from lazylab.errors import (
        DataNotFound,
        InputError,
        LazylabError,
        OutOfTime,
        StoreFault,
        UnitFailed,
    )
    from lazylab.estimators import KernelRegressor, RandomFeaturesRegressor
    from lazylab.ids import PAPERS, Paper
    from lazylab.report import rebuild, write_report
    from lazylab.seeding import canonical_key, derive_seed, numpy_rng, torch_generator
    from lazylab.store import STORE_NAME, Store, StoredUnit
    from lazylab.testing import check_experiment, experiment_checks

# Each top-level public name and the module that defines it, grouped by module.
_HOMES: dict[str, tuple[str, ...]] = {
    "lazylab.errors": ("LazylabError", "InputError", "DataNotFound", "OutOfTime", "StoreFault",
                       "UnitFailed"),
    "lazylab.activations": ("ACTIVATIONS", "Activation", "get_activation"),
    "lazylab.seeding": ("canonical_key", "derive_seed", "numpy_rng", "torch_generator"),
    "lazylab.device": ("available_devices", "memory_budget", "resolve_device",
                       "set_memory_budget"),
    "lazylab.store": ("STORE_NAME", "Store", "StoredUnit"),
    "lazylab.report": ("rebuild", "write_report"),
    "lazylab.ids": ("PAPERS", "Paper"),
    "lazylab.testing": ("check_experiment", "experiment_checks"),
    "lazylab.estimators": ("KernelRegressor", "RandomFeaturesRegressor"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "__version__",
    # errors (lazylab.errors)
    "LazylabError", "InputError", "DataNotFound", "OutOfTime", "StoreFault", "UnitFailed",
    # activations by name (lazylab.activations)
    "ACTIVATIONS", "Activation", "get_activation",
    # seeds (lazylab.seeding)
    "canonical_key", "derive_seed", "numpy_rng", "torch_generator",
    # devices and the memory budget (lazylab.device)
    "available_devices", "memory_budget", "resolve_device", "set_memory_budget",
    # the store of finished work units (lazylab.store)
    "STORE_NAME", "Store", "StoredUnit",
    # the report over an output directory (lazylab.report)
    "rebuild", "write_report",
    # the reproduced papers (lazylab.ids; their BibTeX: lazylab.bibtex)
    "PAPERS", "Paper",
    # checks of an experiment plugin (lazylab.testing)
    "check_experiment", "experiment_checks",
    # scikit-learn estimators (lazylab.estimators)
    "KernelRegressor", "RandomFeaturesRegressor",
]


def __getattr__(name: str) -> Any:
    """A top-level public name, imported from its module on first use."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'lazylab' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
