"""Bai & Lee (ICLR 2020) specific constructions: the explicit quadratic representer W* of
Theorem 5 / Lemma 2 (:mod:`lazylab.models.bailee.constructions`)."""
