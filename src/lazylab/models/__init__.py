"""Models in every regime: full network, random features, Taylor models, randomized networks.

- :mod:`lazylab.models.groups`: the ``param_groups()`` protocol (first / hidden / last / all)
  that kernels, Taylor models and ``train.fit`` accept by name.
- :class:`TwoLayerNet`: f(x) = s_m sum_r a_r sigma(w_r.x) (+ c), Gaussian or symmetric init,
  NTK / mean-field / no scaling, closed-form Taylor terms and tangent features.
- :class:`RandomFeatures`: fixed random first layer (Ghorbani et al. 2019, Eq. (2)); its
  sklearn-style regressor is :class:`lazylab.estimators.RandomFeaturesRegressor`.
- :func:`taylor_terms`, :class:`TaylorModel`, :class:`LinearizedModel`,
  :class:`QuadraticModel`: f^(j) = (1/j!) d^j/dt^j f(theta0 + tU), any order, closed form for
  TwoLayerNet and torch.func for any module.
- :class:`SignRandomizedNet`, :class:`HigherOrderRandomizedNet`, :func:`moment_matched_pair`:
  the randomized networks of Bai & Lee 2020 (Secs. 3 and 6) with exact moments.
- :class:`MLP2`, :class:`MLP3`, :class:`ResNet3`: Allen-Zhu & Li's (2019) learners, and
  :class:`StackedGrads` / :func:`stacked_forward`: their per-sample gradients in one pass.
- :mod:`lazylab.models.bailee`, :mod:`lazylab.models.nichani`: each paper's explicit
  constructions.
"""

from lazylab.models.groups import GROUP_NAMES, param_group, param_groups
from lazylab.models.mlp import MLP2, MLP3, SignOutputNet
from lazylab.models.ntk_param import ntk_parametrize
from lazylab.models.random_features import RandomFeatures, gaussian_weights
from lazylab.models.randomized import (
    HigherOrderRandomizedNet,
    MomentMatchedPair,
    SignRandomizedNet,
    moment_matched_pair,
)
from lazylab.models.resnet import ResNet3
from lazylab.models.stacked import StackedGrads, stacked_forward
from lazylab.models.taylor import LinearizedModel, QuadraticModel, TaylorModel, taylor_terms
from lazylab.models.two_layer import TwoLayerNet, scale_factor

__all__ = [
    # parameter groups
    "GROUP_NAMES", "param_group", "param_groups",
    # the two-layer network and random features
    "TwoLayerNet", "scale_factor", "RandomFeatures", "gaussian_weights", "ntk_parametrize",
    # Taylor models
    "taylor_terms", "TaylorModel", "LinearizedModel", "QuadraticModel",
    # randomized networks (Bai & Lee 2020)
    "SignRandomizedNet", "HigherOrderRandomizedNet", "MomentMatchedPair", "moment_matched_pair",
    # Allen-Zhu & Li's learners and their stacked per-sample gradients
    "MLP2", "MLP3", "ResNet3", "SignOutputNet", "StackedGrads", "stacked_forward",
]
