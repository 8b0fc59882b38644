"""The ``param_groups()`` protocol: a model's parameters by role (first / hidden / last / all).

Kernels, Taylor models and training speak of "the first layer", "the hidden layers", "the
last layer" or "everything" for any architecture (two-layer nets, three-layer MLPs and
ResNets, random features, Taylor models). A model declares its roles by a method

    param_groups(self) -> dict[str, list[torch.nn.Parameter]]

with keys among :data:`GROUP_NAMES`:

* ``"first"``: the input layer (w_r of f(x) = s sum_r a_r sigma(w_r . x));
* ``"hidden"``: layers between input and output layers (three-layer nets, ResNet blocks);
* ``"last"``: the output layer (a_r and an output offset c);
* ``"all"``: every trainable parameter (always present; the union of the others).

A group lists ``nn.Parameter`` objects of the model (fixed tensors registered as buffers, e.g.
a TwoLayerNet's second layer when ``train_second=False``, belong to no group). Groups a model
does not have are omitted (a two-layer net has no ``"hidden"``). A model without the method
gets ``{"all": [every parameter with requires_grad]}`` from :func:`param_groups`.

Consumers: ``lazylab.kernels.empirical_ntk(net, X, trained=GROUP)``,
``lazylab.models.TaylorModel(net, wrt=GROUP)`` and ``lazylab.train.fit(model, params=GROUP)``
accept a group name and resolve it with :func:`group_param_names` / :func:`param_group`.

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet
>>> net = TwoLayerNet(3, 4, train_second=True, generator=torch.Generator().manual_seed(0))
>>> sorted(net.param_groups())
['all', 'first', 'last']
>>> group_param_names(net, "last")
['a']
"""

from __future__ import annotations

from typing import Protocol, TypeGuard, runtime_checkable

import torch
from torch import nn

#: The role names a ``param_groups()`` dict may use.
GROUP_NAMES = ("first", "hidden", "last", "all")


@runtime_checkable
class HasParamGroups(Protocol):
    """A module that declares its parameters by role (see the module docstring)."""

    def param_groups(self) -> dict[str, list[nn.Parameter]]: ...


def is_group_name(spec: object) -> TypeGuard[str]:
    """True when ``spec`` is one of :data:`GROUP_NAMES`."""
    return isinstance(spec, str) and spec in GROUP_NAMES


def param_groups(model: nn.Module) -> dict[str, list[nn.Parameter]]:
    """The model's groups: its ``param_groups()``, or ``{"all": trainable parameters}``.

    Validates the declaration: keys among :data:`GROUP_NAMES`, ``"all"`` present, every
    listed tensor a parameter of ``model``.
    """
    if isinstance(model, HasParamGroups):
        groups = dict(model.param_groups())
        bad = [k for k in groups if k not in GROUP_NAMES]
        if bad or "all" not in groups:
            raise ValueError(f"{type(model).__name__}.param_groups() must return keys among "
                             f"{', '.join(GROUP_NAMES)} including 'all'; got {sorted(groups)}")
        own = {id(p) for p in model.parameters()}
        for k, ps in groups.items():
            if any(id(p) not in own for p in ps):
                raise ValueError(f"{type(model).__name__}.param_groups()[{k!r}] lists a tensor "
                                 "that is not a parameter of the model")
        return {k: list(v) for k, v in groups.items()}
    return {"all": [p for p in model.parameters() if p.requires_grad]}


def param_group(model: nn.Module, name: str) -> list[nn.Parameter]:
    """The parameters of group ``name``; a clear ``ValueError`` if the model has no such group
    or the group is empty."""
    if not is_group_name(name):
        raise ValueError(f"group must be one of {', '.join(GROUP_NAMES)}; got {name!r}")
    groups = param_groups(model)
    if name not in groups or not groups[name]:
        have = ", ".join(k for k, v in groups.items() if v) or "none"
        raise ValueError(f"{type(model).__name__} has no parameters in group {name!r}; it has: "
                         f"{have}")
    return groups[name]


def group_param_names(model: nn.Module, name: str) -> list[str]:
    """Qualified names (as in ``model.named_parameters()``) of the parameters of a group."""
    by_id = {id(p): k for k, p in model.named_parameters()}
    return [by_id[id(p)] for p in param_group(model, name)]


def _trainable(ps: list[torch.Tensor | None]) -> list[nn.Parameter]:
    """The entries that are parameters (helper for ``param_groups`` implementations)."""
    return [p for p in ps if isinstance(p, nn.Parameter)]
