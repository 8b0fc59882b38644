"""Nichani, Bai & Lee (NeurIPS 2022) specific models: the symmetric-init shifted-sigmoid network
with closed-form f_L, f_Q on cached features (:mod:`~lazylab.models.nichani.network`) and the
constructions W_L, W_Q, W* of Lemmas 1-2 / Theorem 2
(:mod:`~lazylab.models.nichani.constructions`)."""

from lazylab.models.nichani.constructions import (
    construct_wl,
    construct_wq,
    norm_2_4,
    random_signs,
    tau_moment,
)
from lazylab.models.nichani.network import (
    TaylorFeatures,
    nichani_net,
    shifted_sigmoid,
    unit_sphere_rows,
)

__all__ = [
    "TaylorFeatures",
    "construct_wl",
    "construct_wq",
    "nichani_net",
    "norm_2_4",
    "random_signs",
    "shifted_sigmoid",
    "tau_moment",
    "unit_sphere_rows",
]
