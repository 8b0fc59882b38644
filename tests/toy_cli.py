"""``python tests/toy_cli.py ARGS``: the lazylab command line with the toy experiment
registered, for tests that need a real process (signals, kill -9, locks)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lazylab.cli import main  # noqa: E402
from lazylab.experiments import REGISTRY, all_experiments  # noqa: E402
from toy_experiment import ToyMean  # noqa: E402

if __name__ == "__main__":
    all_experiments()
    REGISTRY[ToyMean.id] = ToyMean()
    main()
