"""The empirical NTK of your own model against the closed form.

A standard ``torch.nn`` ReLU network, put into the NTK parametrization, has an empirical NTK
(all parameters) that approaches the infinite-width kernel ``ntk(X, trained="both")`` as the
width grows, at the Monte Carlo rate m^-1/2 (Jacot et al. 2018; Arora et al. 2019, Eq. (3)).
Run: ``python examples/ntk_of_your_model.py``.
"""

import torch

from lazylab.kernels import empirical_ntk, ntk
from lazylab.models import ntk_parametrize


def main() -> list[float]:
    g = torch.Generator().manual_seed(0)
    X = torch.nn.functional.normalize(torch.randn(20, 8, generator=g, dtype=torch.float64), dim=1)
    H = ntk(X, trained="both")
    errors = []
    for m in (500, 2000, 8000):
        net = torch.nn.Sequential(torch.nn.Linear(8, m), torch.nn.ReLU(),
                                  torch.nn.Linear(m, 1)).double()
        ntk_parametrize(net, scale_input_layer=False, generator=torch.Generator().manual_seed(m))
        K = empirical_ntk(net, X, trained="all")
        errors.append(float((K - H).norm() / H.norm()))
        print(f"width {m:5d}: relative error of the empirical NTK {errors[-1]:.4f}")
    print(f"error ratio per 4x width: {errors[1] / errors[0]:.2f}, {errors[2] / errors[1]:.2f} "
          "(m^-1/2 predicts 0.50)")
    return errors


if __name__ == "__main__":
    main()
