"""Models in every regime: full network, random features, Taylor models, randomized networks."""

from lazylab.models.two_layer import TwoLayerNet

__all__ = ["TwoLayerNet"]
