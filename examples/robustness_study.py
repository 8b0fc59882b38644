"""Where does a claim hold? A robustness study from Python.

Re-runs ``bailee-coupling`` at several maximal widths with two seeds each and reports, for
every claim, at how many settings it held (what ``lazylab robustness bailee-coupling --vary
m_max=...`` prints). Run: ``python examples/robustness_study.py [OUT]``.
"""

import sys
import tempfile
from pathlib import Path

import torch

from lazylab.experiments import get_experiment
from lazylab.robustness import run_robustness


def main(out: Path) -> dict[str, str]:
    exp = get_experiment("bailee-coupling")
    _, _, summary = run_robustness(exp, "quick", out, device=torch.device("cpu"),
                                   vary={"m_max": ["10000", "30000"]}, seeds=2)
    for cid, line in summary.items():
        print(f"{cid}: {line}")
    return summary


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
