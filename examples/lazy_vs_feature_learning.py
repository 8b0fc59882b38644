"""Lazy (linearized) vs full training on your own data: how far does the network move?

The same width-m network is trained by the same full-batch gradient descent twice: as itself,
and as its first-order Taylor model around the initialization (``LinearizedModel``: the NTK
regime). With PyTorch's standard parametrization the step size must stay below 2 / lambda_max
of the empirical NTK, which grows with the width; at width 256 the two models part ways, and the
gap between their predictions is the "beyond the kernel" part. Data: scikit-learn's bundled
digits, 3 vs 8.
Run: ``python examples/lazy_vs_feature_learning.py``.
"""

import torch
from sklearn.datasets import load_digits

from lazylab.models import LinearizedModel
from lazylab.train import fit


def main() -> dict[str, float]:
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    X = torch.nn.functional.normalize(torch.tensor(X[keep], dtype=torch.float64), dim=1)
    y = torch.tensor((y[keep] == 3) * 2.0 - 1.0, dtype=torch.float64).unsqueeze(1)
    Xtr, ytr, Xte, yte = X[:250], y[:250], X[250:], y[250:]
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(),
                              torch.nn.Linear(256, 1)).double()
    lin = LinearizedModel(net)  # frozen copy of the init, trained in the tangent space
    out = {}
    for name, model in (("linearized", lin), ("full network", net)):
        fit(model, data=(Xtr, ytr), loss="mse", optimizer="gd", lr=0.02, steps=600)
        with torch.no_grad():
            err = float(((model(Xte) > 0).double() * 2 - 1 != yte).double().mean())
        out[name] = err
        print(f"{name:13s}: test error {err:.3f}")
    with torch.no_grad():
        gap = float((net(Xte) - lin(Xte)).pow(2).mean().sqrt())
    out["prediction gap"] = gap
    print(f"RMS gap between the two predictors on the test set: {gap:.3f}")
    return out


if __name__ == "__main__":
    main()
