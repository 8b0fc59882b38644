"""Bai & Lee (ICLR 2020) specific constructions: the explicit quadratic representer W* of
Theorem 5 / Lemma 2 (:mod:`lazylab.models.bailee.constructions`)."""

from lazylab.models.bailee.constructions import (
    QuadraticRepresenter,
    coherent_direction,
    combine_representers,
    norm_2p,
    phase_sine,
    quadratic_representer,
    relu_hermite_coefficient,
    relu_rf_coefficient,
    representable_exponent,
    xor_representer,
)

__all__ = [
    # the quadratic representer W* and its pieces
    "QuadraticRepresenter", "combine_representers", "quadratic_representer", "xor_representer",
    "coherent_direction", "norm_2p", "phase_sine", "representable_exponent",
    # the ReLU's Hermite and random-features coefficients
    "relu_hermite_coefficient", "relu_rf_coefficient",
]
