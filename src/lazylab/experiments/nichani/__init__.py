"""Nichani, Bai & Lee (NeurIPS 2022), "Identifying good directions to escape the NTK regime":
four experiments.

Importing this package registers ``nichani-regularizer`` (Fig. 1, Sec. 5; Remark 1) and
``nichani-spectrum`` (the spectrum of Sigma and of the Gram matrix, Secs. 1.1 and 4.1),
``nichani-mlp-scaling`` (Fig. 2, Sec. 5) and ``nichani-taylor`` (Sec. 5 and App. G).
"""

from lazylab.experiments.nichani.mlp_scaling import MlpScaling
from lazylab.experiments.nichani.regularizer import Regularizer
from lazylab.experiments.nichani.spectrum import Spectrum
from lazylab.experiments.nichani.taylor import TaylorExperiment

__all__ = ["MlpScaling", "Regularizer", "Spectrum", "TaylorExperiment"]
