"""Experiments of Arora, Du, Hu, Li, Wang (2019), "Fine-Grained Analysis of Optimization and
Generalization for Overparameterized Two-Layer Neural Networks"; importing this package
registers them: ``arora-convergence`` (Fig. 1(a)(c)), ``arora-spectrum`` (Fig. 1(b)(d)),
``arora-complexity`` (Fig. 2) and ``arora-learnability`` (Sec. 6 and Lemma 5.3).

Predictions that depend on the drawn inputs or labels (the Theorem 4.1 curve, Lemma 5.3's D(K),
the complexity measure, the Theorem 5.1 bound, the expectation of y^T H^-1 y for random labels)
are theory rows: every experiment computes H_inf, its eigendecomposition and Cholesky factor
once per run in ``prepare(p, device)`` (minutes of CPU at the paper's n = 10^4), which the
runner ships to the workers and to ``theory(p, prep=...)``. Labels that are part of the
problem (Fig. 1's random labels, Fig. 2's corruptions) are drawn from ``data_seed``; the seeds
vary the network's initialization. ``validate(p)`` refuses, before anything is computed, a GD
step with eta lambda_max(H_inf) >= 2, more points than the data hold and missing data.

Claims follow :mod:`lazylab.experiments.base`'s principles: the finite-width error model of
Theorem 4.1 and Lemma 5.3 is a Monte Carlo over the width-m kernel H(0)
(:mod:`lazylab.theory.arora_width`); exact inequalities (Theorem 6.1, l1 >= 0-1 error) are
consistency checks. Shared choices (centring, learning rate, initialization, stopping rule,
label draws) are documented in :mod:`lazylab.experiments.arora.common`.
"""

from lazylab.experiments.arora import complexity, convergence, learnability, spectrum
from lazylab.experiments.arora.complexity import Complexity, ComplexityParams, ComplexityPrep
from lazylab.experiments.arora.convergence import Convergence, ConvergenceParams, ConvergencePrep
from lazylab.experiments.arora.learnability import (
    Learnability,
    LearnabilityParams,
    LearnabilityPrep,
)
from lazylab.experiments.arora.panels import PanelParams, Panels
from lazylab.experiments.arora.spectrum import LabelSpectrum, SpectrumParams

__all__ = [
    # the experiments' modules (importing each registers its experiment)
    "complexity", "convergence", "learnability", "spectrum",
    # arora-convergence (Fig. 1(a)(c))
    "Convergence", "ConvergenceParams", "ConvergencePrep",
    # arora-spectrum (Fig. 1(b)(d))
    "LabelSpectrum", "SpectrumParams",
    # arora-complexity (Fig. 2)
    "Complexity", "ComplexityParams", "ComplexityPrep",
    # arora-learnability (Sec. 6, Lemma 5.3)
    "Learnability", "LearnabilityParams", "LearnabilityPrep",
    # the multi-panel base the figures share
    "Panels", "PanelParams",
]
