"""``lazylab reproduce ...`` with every training loop capped at CAP steps and every evaluation
pass at one row block (:func:`lazylab.train.meter.capped`): the paper-scale code paths at the
paper's shapes in minutes, a dry run of ``bench/device_session.sh`` on a CPU.

The units it stores are not the experiment's results (their loops stopped early): give it a
scratch ``--out``, never a store a real run resumes. One worker only (the cap is a context
variable of this process).

Run: ``.venv/bin/python bench/capped_reproduce.py CAP reproduce ID --scale paper --out DIR ...``
"""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 2 or not args[0].isdigit() or int(args[0]) < 1:
        sys.exit("usage: capped_reproduce.py CAP reproduce ID ... --out SCRATCH_DIR "
                 "(CAP: an integer >= 1)")
    if "--out" not in args or any(a.startswith("--workers") or a == "--backend" for a in args):
        sys.exit("capped_reproduce.py: give a scratch --out, and no --workers or --backend "
                 "(the cap holds in this process only)")
    from lazylab.cli import main as lazylab_main
    from lazylab.train.meter import capped

    sys.argv = ["lazylab", *args[1:]]
    with capped(int(args[0]), blocks=1):
        lazylab_main()


if __name__ == "__main__":
    main()
