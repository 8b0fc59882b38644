"""Experiments of Arora, Du, Hu, Li, Wang (2019), "Fine-Grained Analysis of Optimization and
Generalization for Overparameterized Two-Layer Neural Networks"; importing this package
registers them: ``arora-convergence`` (Fig. 1(a)(c)), ``arora-spectrum`` (Fig. 1(b)(d)),
``arora-complexity`` (Fig. 2) and ``arora-learnability`` (Sec. 6 and Lemma 5.3)."""

from lazylab.experiments.arora import complexity, convergence, learnability, spectrum

__all__ = ["complexity", "convergence", "learnability", "spectrum"]
