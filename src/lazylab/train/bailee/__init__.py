"""Bai & Lee (ICLR 2020) specific training objectives: the randomized risk L-tilde and its exact
sign moments (:mod:`lazylab.train.bailee.randomized_risk`), and the landscape quantities of
Lemma 1 / Theorem 2 / Corollary 3 / Theorem 4 (:mod:`lazylab.train.bailee.landscape`)."""

from lazylab.train.bailee.landscape import (
    directional_derivatives,
    expected_sign_hessian_form,
    landscape_gap,
    lemma1_terms,
    loss_derivatives,
    squared_landscape_terms,
)
from lazylab.train.bailee.randomized_risk import (
    EXACT_SQUARED_LOSSES,
    ExactSignMoments,
    FreshSigmaForward,
    linear_term_second_moment,
    quadratic_risk,
    regularized_randomized_risk,
    sign_moments,
    train_randomized,
)

__all__ = [
    # the randomized-sign risk and its training (train.bailee.randomized_risk)
    "EXACT_SQUARED_LOSSES", "ExactSignMoments", "FreshSigmaForward", "linear_term_second_moment",
    "sign_moments", "quadratic_risk", "regularized_randomized_risk",
    "train_randomized",
    # landscape quantities of Lemma 1 to Theorem 4 (train.bailee.landscape)
    "directional_derivatives", "expected_sign_hessian_form", "landscape_gap", "lemma1_terms",
    "squared_landscape_terms", "loss_derivatives",
]
