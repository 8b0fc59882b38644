"""One paper figure end to end from Python: run, store, claims, figure.

The same path as ``lazylab reproduce bailee-coupling`` (Bai & Lee 2020, Sec. 3: the
sign-randomized network's linear part vanishes like m^-1/4 of the quadratic part), driven from
Python: resolve the parameters, run every unit into a store, then read the verdicts.
Run: ``python examples/paper_figure.py [OUT]``.
"""

import sys
import tempfile
from pathlib import Path

import torch

from lazylab.experiments import get_experiment
from lazylab.runner import resolve_spec, run_experiment
from lazylab.store import STORE_NAME, Store


def main(out: Path) -> dict[str, str]:
    exp = get_experiment("bailee-coupling")
    spec = resolve_spec(exp, "quick", {"m_max": "30000"}, None, torch.device("cpu"))
    with Store(out / STORE_NAME) as store:
        outcome = run_experiment(spec, out, store)
    for c in outcome.claims:
        print(f"{c.id:10s} {c.status:8s} measured {c.measured:.4g}, expected {c.expected:.4g} "
              f"+- {c.tolerance:.3g}")
    print(f"figure: {out / exp.id / (exp.id + '.png')}")
    return {c.id: c.status for c in outcome.claims}


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
