"""Experiments of Ghorbani, Mei, Misiakiewicz, Montanari (2019), "Limitations of Lazy Training of
Two-layers Neural Networks" (Figs. 1 and 2); importing this package registers them:
``ghorbani-qf-width``, ``ghorbani-qf-samples``, ``ghorbani-mg-width``, ``ghorbani-mg-samples``."""

from lazylab.experiments.ghorbani import mg_samples, mg_width, qf_samples, qf_width

__all__ = ["mg_samples", "mg_width", "qf_samples", "qf_width"]
