"""Experiments of Arora, Du, Hu, Li, Wang (2019), "Fine-Grained Analysis of Optimization and
Generalization for Overparameterized Two-Layer Neural Networks"; importing this package
registers them: ``arora-convergence`` (Fig. 1(a)(c)), ``arora-spectrum`` (Fig. 1(b)(d)),
``arora-complexity`` (Fig. 2) and ``arora-learnability`` (Sec. 6 and Lemma 5.3).

Predictions that depend on the drawn inputs or labels (the Theorem 4.1 curve, Lemma 5.3's D(K),
the complexity measure and the Theorem 5.1 bound) are computed inside the work units, next to
the measurements they are compared with: they need H_inf of the sampled points, minutes of CPU
at the paper's n = 10^4, so they cannot be recomputed on every assembly as ``theory()`` rows
are. They are rows of kind "simulation" whose metrics are named ``predicted_*``,
``complexity``, ``rkhs_norm`` or ``bound``; data-free closed forms (Theorem 6.1's bounds, the
random-label expectation k/n) are ``theory()`` rows. Shared choices (centring, learning rate,
initialization, stopping rule) are documented in :mod:`lazylab.experiments.arora.common`.
"""

from lazylab.experiments.arora import complexity, convergence, learnability, spectrum

__all__ = ["complexity", "convergence", "learnability", "spectrum"]
