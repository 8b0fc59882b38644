"""Nichani, Bai & Lee (NeurIPS 2022), "Identifying good directions to escape the NTK regime":
the four experiments of spec Secs. 5-6.

Importing this package registers ``nichani-regularizer`` (Fig. 1; C7, C10, C11, C16) and
``nichani-spectrum`` (C4-C6), ``nichani-mlp-scaling`` (Fig. 2; C15) and
``nichani-taylor`` (App. G; C17).
"""

from lazylab.experiments.nichani.mlp_scaling import MlpScaling
from lazylab.experiments.nichani.regularizer import Regularizer
from lazylab.experiments.nichani.spectrum import Spectrum
from lazylab.experiments.nichani.taylor import TaylorExperiment

__all__ = ["MlpScaling", "Regularizer", "Spectrum", "TaylorExperiment"]
