"""Copy the quick-scale figures of a run folder into ``docs/figures/ID.png``, where the docs
hook (``mkdocs_hooks.py``) shows each on its paper page.

    lazylab reproduce all --scale quick --out runs/quick -y
    python bench/quick_figures.py runs/quick

Only built-in experiments are copied (a plugin's figure does not belong to these docs); an
experiment whose figure is missing from the run folder is named and the exit code is 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"


def builtin_ids() -> list[str]:
    from lazylab.experiments import all_experiments

    return sorted(e.id for e in all_experiments()
                  if type(e).__module__.startswith("lazylab.experiments."))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the --out folder of a quick run")
    ap.add_argument("ids", nargs="*", help="experiments to copy (default: every built-in one)")
    args = ap.parse_args(argv)
    if not args.run.is_dir():
        ap.error(f"run: {args.run} is not a folder")
    missing = []
    for eid in args.ids or builtin_ids():
        src = args.run / eid / f"{eid}.png"
        if not src.is_file():
            missing.append(eid)
            continue
        shutil.copyfile(src, FIGURES / f"{eid}.png")
        print(f"{src} -> {(FIGURES / f'{eid}.png').relative_to(ROOT)}")
    if missing:
        print(f"error: no figure in {args.run} for: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
