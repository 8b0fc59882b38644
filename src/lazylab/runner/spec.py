"""What to run: a :class:`RunSpec` (experiment, resolved parameters, scale, seeds, device,
execution policy) and its grid of :class:`WorkUnit` s in canonical order.

The identity of stored units (:attr:`RunSpec.identity`) is everything their numbers depend on:
experiment id, parameters, scale, device type, the execution policy, the code a unit runs
(per-file hashes of every ``.py`` file of lazylab and of a plugin's own package,
:meth:`Experiment.code_identity`), the versions of lazylab, torch and numpy, and a
fingerprint of the contents of every real data file the run reads. ``--resume`` is refused,
naming what changed (down to the edited source files), when it differs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata
from typing import TYPE_CHECKING, Any

from lazylab.runner.policy import ExecutionPolicy
from lazylab.seeding import canonical_key, derive_seed

if TYPE_CHECKING:
    import torch

    from lazylab.experiments.base import Experiment, ExperimentParams

#: Packages whose versions are part of the identity of stored units.
IDENTITY_PACKAGES = ("lazylab", "torch", "numpy")


def package_versions() -> dict[str, str]:
    """Installed versions of :data:`IDENTITY_PACKAGES`."""
    out = {}
    for pkg in IDENTITY_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


@dataclass(frozen=True)
class RunSpec:
    """One experiment with fully resolved parameters, scale, seed count, device and policy."""

    exp: Experiment
    params: ExperimentParams
    scale: str
    seeds: int
    device: torch.device
    policy: ExecutionPolicy = field(default_factory=ExecutionPolicy)

    @cached_property
    def identity(self) -> dict[str, Any]:
        """What the stored units depend on (see the module docstring); computed once, so a
        source file edited during the run does not change the identity mid-run.

        The seed count is not part of it: unit ``(key, s)`` does not depend on how many seeds
        run, so resuming with more seeds computes only the new ones.
        """
        out = {"experiment": self.exp.id, "params": self.params.model_dump(mode="json"),
               "scale": self.scale, "device": self.device.type,
               "policy": self.policy.identity(), "code": self.exp.code_identity(),
               "versions": package_versions()}
        data = self.data_fingerprints
        if data:
            out["data"] = data
        return out

    @cached_property
    def data_fingerprints(self) -> dict[str, str]:
        """Data set name -> fingerprint of the files a run reads (:meth:`Experiment.
        data_sources`, :func:`lazylab.data.real.dataset_fingerprint`); {} for synthetic data."""
        from lazylab.data.real import dataset_fingerprint

        return {name: dataset_fingerprint(name, root)
                for name, root in self.exp.data_sources(self.params)}

    @cached_property
    def unit_keys(self) -> list[dict[str, Any]]:
        """The experiment's grid, ``exp.units(params)``: computed once per run (by
        :func:`~lazylab.runner.resolve_spec`, then checked and planned (:func:`plan_units`),
        priced and assembled from)."""
        return list(self.exp.units(self.params))

    @cached_property
    def seed_cost(self) -> tuple[float, float | None]:
        """The cost model's ``(seconds, peak bytes or None)`` of one seed,
        ``exp.cost(params, scale)``: computed once per run (the cost guard's estimate, the
        GPU reservation and the ``--max-time`` clock all read it), the model handed the grid
        :attr:`unit_keys` instead of computing it again
        (:func:`lazylab.experiments.cost.known_grid`)."""
        from lazylab.experiments.cost import known_grid

        with known_grid(self.params, self.unit_keys):
            secs, peak = self.exp.cost(self.params, self.scale)
        return secs, peak

    @cached_property
    def config_hash(self) -> str:
        """16 hex digits of the SHA-256 of the canonical identity."""
        text = json.dumps(self.identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class WorkUnit:
    """One cell of the grid: a unit key, a seed index and the seed derived from them."""

    key: dict[str, Any]
    key_json: str
    seed_index: int
    seed: int


def plan_units(spec: RunSpec) -> list[WorkUnit]:
    """The grid in canonical order: ``units(p)`` order (:attr:`RunSpec.unit_keys`, computed
    once), then seed index; InputError (exit 2) when the parameters make the grid repeat a
    unit key (e.g. ``--set dists=sphere,sphere``), whose repeats would be stored once and
    counted twice."""
    from lazylab.errors import InputError
    from lazylab.experiments.grid_check import check_unit_keys

    try:
        check_unit_keys(spec.exp.id, spec.unit_keys)
    except ValueError as e:
        raise InputError(f"{e} (a list parameter set with a repeated value?)") from None
    out = []
    for key in spec.unit_keys:
        kj = canonical_key(key)
        for s in range(spec.seeds):
            out.append(WorkUnit(key, kj, s, derive_seed(spec.exp.id, key, s)))
    return out


@dataclass(frozen=True)
class WorkGroup:
    """Units computed by one call: a singleton (``label`` None) or the members of a batched
    group (:meth:`~lazylab.experiments.base.Experiment.group`) at one seed index, in canonical
    order. ``seed`` (from the experiment id, the label and the seed index) seeds what the
    members share."""

    label: str | None
    seed_index: int
    seed: int
    units: tuple[WorkUnit, ...]

    @property
    def members(self) -> list[tuple[dict[str, Any], int]]:
        """``(key, seed)`` of each member, as ``run_group`` receives them."""
        return [(u.key, u.seed) for u in self.units]


def plan_groups(spec: RunSpec, units: list[WorkUnit] | None = None) -> list[WorkGroup]:
    """The grid as groups, ordered by their first unit in :func:`plan_units` order.

    Membership depends on the parameters only: every unit of the plan with the same label and
    seed index belongs to the group, whatever is already stored.
    """
    plan = plan_units(spec) if units is None else units
    groups: dict[tuple[str, int], list[WorkUnit]] = {}
    order: list[tuple[str | None, int, Any]] = []
    for u in plan:
        label = spec.exp.group(spec.params, u.key)
        if label is None:
            order.append((None, u.seed_index, u))
            continue
        gk = (str(label), u.seed_index)
        if gk not in groups:
            groups[gk] = []
            order.append((gk[0], u.seed_index, gk))
        groups[gk].append(u)
    out = []
    for label, s, item in order:
        if label is None:
            out.append(WorkGroup(None, s, item.seed, (item,)))
        else:
            seed = derive_seed(spec.exp.id, {"group": label}, s)
            out.append(WorkGroup(label, s, seed, tuple(groups[item])))
    return out
