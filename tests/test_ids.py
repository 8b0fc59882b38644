"""The torch-free id manifest (lazylab.ids) equals the registry, and unknown ids exit fast."""

from __future__ import annotations

import subprocess
import sys

from lazylab.experiments import PAPERS, all_experiments
from lazylab.ids import EXPERIMENT_PAPERS, PAPER_KEYS
from lazylab.runner.manifest import builtin


def test_manifest_equals_registry():
    assert {e.id: e.paper for e in builtin(all_experiments())} == EXPERIMENT_PAPERS
    assert tuple(PAPERS) == PAPER_KEYS


def test_unknown_id_is_refused_before_torch_is_imported():
    code = ("import sys\nfrom lazylab.cli import main\nsys.argv = ['lazylab', 'reproduce', "
            "'bailee-xr']\ntry:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('torch' in sys.modules, code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=900)
    assert out.stdout.split()[-2:] == ["False", "2"], out.stdout + out.stderr
    assert "did you mean bailee-xor" in out.stderr
