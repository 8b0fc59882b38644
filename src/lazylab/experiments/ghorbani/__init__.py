"""Experiments of Ghorbani, Mei, Misiakiewicz, Montanari (2019), "Limitations of Lazy Training of
Two-layers Neural Networks" (Figs. 1 and 2); importing this package registers them."""

from lazylab.experiments.ghorbani import mg_width, qf_width

__all__ = ["mg_width", "qf_width"]
