"""Experiments of Ghorbani, Mei, Misiakiewicz, Montanari (2019), "Limitations of Lazy Training of
Two-layers Neural Networks" (Figs. 1 and 2); importing this package registers them:
``ghorbani-qf-width``, ``ghorbani-qf-samples``, ``ghorbani-mg-width``, ``ghorbani-mg-samples``."""

from lazylab.experiments.ghorbani import mg_samples, mg_width, qf_samples, qf_width
from lazylab.experiments.ghorbani.common import GhorbaniParams
from lazylab.experiments.ghorbani.mg_samples import MGSamples, MGSamplesParams
from lazylab.experiments.ghorbani.mg_width import MGWidth, MGWidthParams
from lazylab.experiments.ghorbani.qf_samples import QFSamples, QFSamplesParams
from lazylab.experiments.ghorbani.qf_width import QFWidth, QFWidthParams
from lazylab.experiments.ghorbani.samples import SamplesExperiment, SamplesParams
from lazylab.experiments.ghorbani.widths import WidthExperiment, WidthParams

__all__ = [
    # the experiments' modules (importing each registers its experiment)
    "mg_samples", "mg_width", "qf_samples", "qf_width",
    # ghorbani-qf-width and ghorbani-mg-width (Figs. 1 and 2, left)
    "QFWidth", "QFWidthParams", "MGWidth", "MGWidthParams",
    # ghorbani-qf-samples and ghorbani-mg-samples (Figs. 1 and 2, right)
    "QFSamples", "QFSamplesParams", "MGSamples", "MGSamplesParams",
    # the shared bases
    "GhorbaniParams", "WidthExperiment", "WidthParams", "SamplesExperiment", "SamplesParams",
]
