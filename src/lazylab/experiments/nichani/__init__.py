"""Nichani, Bai & Lee (NeurIPS 2022), "Identifying good directions to escape the NTK regime":
four experiments.

Importing this package registers ``nichani-regularizer`` (Fig. 1, Sec. 5; Remark 1) and
``nichani-spectrum`` (the spectrum of Sigma and of the Gram matrix, Secs. 1.1 and 4.1),
``nichani-mlp-scaling`` (Fig. 2, Sec. 5) and ``nichani-taylor`` (Sec. 5 and App. G).
"""

from lazylab.experiments.nichani.mlp_scaling import MlpScaling, MlpScalingParams
from lazylab.experiments.nichani.regularizer import Regularizer, RegularizerParams
from lazylab.experiments.nichani.spectrum import Spectrum, SpectrumParams
from lazylab.experiments.nichani.taylor import (
    TaylorExperiment,
    TaylorParams,
    image_net,
    infinite_ntk,
    kernel_rows,
)

__all__ = [
    "Regularizer", "RegularizerParams",  # nichani-regularizer (Fig. 1, Sec. 5)
    "Spectrum", "SpectrumParams",  # nichani-spectrum (Secs. 1.1, 4.1)
    "MlpScaling", "MlpScalingParams",  # nichani-mlp-scaling (Fig. 2, Sec. 5)
    "TaylorExperiment", "TaylorParams",  # nichani-taylor (Sec. 5, App. G)
    # its networks and their infinite-width NTK regression
    "image_net", "infinite_ntk", "kernel_rows",
]
