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
"""

from lazylab.models.groups import GROUP_NAMES, param_group, param_groups
from lazylab.models.ntk_param import ntk_parametrize
from lazylab.models.random_features import RandomFeatures, gaussian_weights
from lazylab.models.randomized import (
    HigherOrderRandomizedNet,
    MomentMatchedPair,
    SignRandomizedNet,
    moment_matched_pair,
)
from lazylab.models.taylor import LinearizedModel, QuadraticModel, TaylorModel, taylor_terms
from lazylab.models.two_layer import TwoLayerNet, scale_factor

__all__ = [
    "GROUP_NAMES",
    "param_group",
    "param_groups",
    "TwoLayerNet",
    "scale_factor",
    "RandomFeatures",
    "gaussian_weights",
    "taylor_terms",
    "TaylorModel",
    "LinearizedModel",
    "QuadraticModel",
    "SignRandomizedNet",
    "HigherOrderRandomizedNet",
    "MomentMatchedPair",
    "moment_matched_pair",
    "ntk_parametrize",
]
